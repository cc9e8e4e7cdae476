#include "operator/runtime/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/process/worker_events.h"

namespace torus::runtime {
namespace {

// "all epochs done" -> "all_epochs_done": one RESULT token.
std::string underscored(std::string text) {
  for (char& c : text)
    if (c == ' ') c = '_';
  return text;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string start_line(const std::string& run, const std::string& reason, int64_t step, const std::string& from_run,
                       const std::string& path) {
  const std::string who = run.empty() ? "this run" : "run " + run;
  if (reason == "ResumeFrom")
    return "start: " + who + " resumed at step " + std::to_string(step) + " from run " + from_run + "'s checkpoint " +
           path + " (spec.training.checkpoint.resumeFrom)";
  if (reason == "ThisRun")
    return "start: " + who + " resumed at step " + std::to_string(step) + " from its own checkpoint " + path;
  return "start: " + who + " trained from step 0 (a new run)";
}

std::string format_duration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lds", s);
  }
  return buf;
}

void RunReport::on_attempt_start(int attempt, LedgerClock::time_point now) {
  attempt_ = attempt;
  samples_ = {};
  last_evaluation_s_ = 0;  // each attempt's trainer starts its clock afresh
  if (stragglers_) stragglers_->on_attempt_start();
  goodput_.on_attempt_start(attempt, now);
}

std::optional<Straggler> RunReport::on_event(int rank, const process::WorkerEvent& e, LedgerClock::time_point now) {
  goodput_.on_event(rank, e, now);
  if (const auto* started = std::get_if<process::StartedEvent>(&e); started && !stragglers_)
    stragglers_.emplace(started->world_size);
  std::optional<Straggler> straggler = stragglers_ ? stragglers_->on_event(rank, e) : std::nullopt;
  if (const auto* started = std::get_if<process::StartedEvent>(&e)) {
    on_started(rank, *started);
  } else if (rank == 0) {
    std::visit([this](const auto& x) { on_rank0(x); }, e);
  }
  return straggler;
}

void RunReport::on_started(int rank, const process::StartedEvent& e) {
  if (e.metrics_port.value_or(0) > 0) metrics_ports_.push_back(*e.metrics_port);
  if (rank != 0) return;
  run_ = e.run;
  if (e.resumed_step > 0) resumed_step_ = e.resumed_step;
  if (!start_) start_ = Start{e.resumed_step, e.resumed_from};
  left_to_train_ = e.left_to_train.value_or("");
  if (e.target_accuracy) target_ = *e.target_accuracy;
}

void RunReport::on_rank0(const process::ProgressEvent& e) {
  progress_.epoch = e.epoch;
  progress_.epochs = e.epochs;
  progress_.step = e.step;
  progress_.steps_total = e.steps_total;
  progress_.loss = e.loss;
  progress_.lr = e.lr;
  progress_.images_per_s = e.images_per_s;
  progress_.eta_s = e.eta_s;
  busbw_gbps_ = e.busbw_gbps;
  images_per_s_ = progress_.images_per_s;
  if (samples_.epoch != progress_.epoch) samples_ = {progress_.epoch, 0, 0, 0};
  ++samples_.count;
  samples_.loss_sum += progress_.loss;
  samples_.last_images_per_s = progress_.images_per_s;
}

void RunReport::on_rank0(const process::EvaluatedEvent& e) {
  add_epoch_row(e);
  progress_.accuracy = e.accuracy;
  final_accuracy_ = progress_.accuracy;
  if (!time_to_target_s_ && e.time_to_target_s) time_to_target_s_ = *e.time_to_target_s;
}

void RunReport::on_rank0(const process::FinishedEvent& e) {
  if (e.accuracy) final_accuracy_ = *e.accuracy;
  if (e.time_to_target_s) time_to_target_s_ = *e.time_to_target_s;
  images_per_s_ = e.images_per_s;
  busbw_gbps_ = e.busbw_gbps;
  if (e.left_to_train) left_to_train_ = *e.left_to_train;
  algorithm_ = e.allreduce_algorithm.value_or(algorithm_);
  allreduce_calls_ = e.allreduce_calls.value_or(allreduce_calls_);
  allreduce_bytes_ = e.allreduce_bytes.value_or(allreduce_bytes_);
}

void RunReport::add_epoch_row(const process::EvaluatedEvent& e) {
  EpochRow row;
  row.epoch = e.epoch;
  if (e.train_loss && e.images_per_s) {  // the trainer's own figures for the epoch
    row.train_loss = e.train_loss;
    row.images_per_s = e.images_per_s;
  } else if (samples_.epoch == row.epoch && samples_.count > 0) {  // rank 0's progress samples
    row.train_loss = samples_.loss_sum / samples_.count;
    row.images_per_s = samples_.last_images_per_s;
  }
  row.val_loss = e.loss;
  row.accuracy = e.accuracy;
  row.seconds = std::max(e.elapsed_s - last_evaluation_s_, 0.0);
  last_evaluation_s_ = e.elapsed_s;
  samples_ = {};
  epochs_.push_back(row);
}

double RunReport::fraction_done() const {
  if (progress_.steps_total <= 0) return 0;
  return std::clamp(static_cast<double>(progress_.step) / static_cast<double>(progress_.steps_total), 0.0, 1.0);
}

std::string RunReport::progress_line(BarStyle style) const {
  std::ostringstream os;
  os << "epoch " << progress_.epoch << "/" << progress_.epochs;
  if (progress_.steps_total > 0) {
    char percent[8];
    std::snprintf(percent, sizeof(percent), "%3d%%", static_cast<int>(fraction_done() * 100));
    os << " " << progress_bar(fraction_done(), 20, style) << " " << percent;
  }
  os << " · step " << progress_.step;
  if (progress_.steps_total > 0) os << "/" << progress_.steps_total;
  os << " · loss " << fixed(progress_.loss, 3);
  if (progress_.accuracy) os << " · acc " << fixed(*progress_.accuracy * 100, 2) << "%";
  os << " · " << fixed(progress_.images_per_s, 0) << " img/s";
  if (progress_.eta_s) os << " · ETA " << format_duration(*progress_.eta_s);
  if (attempt_ > 0) os << " · attempt " << attempt_;
  return os.str();
}

std::string progress_bar(double fraction, int cells, BarStyle style) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  std::string bar = style == BarStyle::kUnicode ? "|" : "[";
  if (style == BarStyle::kAscii) {
    const int full = static_cast<int>(f * cells);
    bar += std::string(static_cast<size_t>(full), '#') + std::string(static_cast<size_t>(cells - full), ' ') + "]";
    return bar;
  }
  // Eighths of a cell: U+2588 (full) down to U+258F (one eighth).
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const int eighths = static_cast<int>(f * cells * 8);
  const int full = eighths / 8;
  for (int i = 0; i < full; ++i) bar += "█";
  int used = full;
  if (full < cells && eighths % 8 > 0) {
    bar += kEighths[eighths % 8];
    ++used;
  }
  bar += std::string(static_cast<size_t>(cells - used), ' ') + "|";
  return bar;
}

std::string epoch_header() { return "epoch  train loss  val loss  val acc  images/s     time"; }

std::string epoch_row(const EpochRow& row) {
  auto or_dash = [](const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : std::string("-"); };
  // Under a minute the epoch's tenths matter; beyond, format_duration's units read better.
  const std::string time = row.seconds < 60 ? fixed(row.seconds, 1) + "s" : format_duration(row.seconds);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%5d  %10s  %8s  %7s  %8s  %7s", row.epoch, or_dash(row.train_loss, 4).c_str(),
                fixed(row.val_loss, 4).c_str(), (fixed(row.accuracy * 100, 2) + "%").c_str(),
                or_dash(row.images_per_s, 0).c_str(), time.c_str());
  return buf;
}

std::string fit_to_width(const std::string& line, int columns) {
  if (columns <= 0) return line;
  int seen = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const bool starts_code_point = (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80;
    if (starts_code_point && seen++ == columns) return line.substr(0, i);
  }
  return line;
}

bool PlainProgressPacer::due(double fraction, std::chrono::steady_clock::time_point now) {
  const int tenth = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 10);
  if (last_ && tenth == last_tenth_ && now - *last_ < interval_) return false;
  last_ = now;
  last_tenth_ = tenth;
  return true;
}

std::string goodput_line(const JobGoodput& g) {
  using process::TimePart;
  auto s = [](double v) { return fixed(v, 1) + " s"; };
  std::string line = "goodput " + fixed(g.ratio(), 3) + " of " + s(g.wall_s) + ": training " +
                     s(g.kept[TimePart::kTraining]) + ", start-up " + s(g.kept[TimePart::kStartup]) +
                     " (communicator " + s(g.kept.comm_init_s) + "), restore " + s(g.kept[TimePart::kRestore]) +
                     ", data wait " + s(g.kept[TimePart::kDataWait]) + ", communication wait " +
                     s(g.kept[TimePart::kCommWait]) + ", evaluation " + s(g.kept[TimePart::kEvaluation]) +
                     ", checkpoints " + s(g.kept[TimePart::kCheckpoint]) + ", lost work " + fixed(g.lost_work_s, 2) +
                     " s (" + std::to_string(g.lost_steps) + " steps), restarts and other " + s(g.restart_and_other_s) +
                     "; step " + fixed(g.step_s * 1000, 1) + " ms";
  return line;
}

std::string straggler_line(const Straggler& s) {
  return "straggler: rank " + std::to_string(s.rank) + " arrives at the all-reduce after " + fixed(s.slowdown, 2) +
         "x the gang's median own work per step (" + fixed(s.arrival_s * 1000, 1) + " vs " +
         fixed(s.median_s * 1000, 1) + " ms)";
}

std::string goodput_fields(const JobGoodput& g) {
  std::ostringstream os;
  os << " goodput=" << fixed(g.ratio(), 3) << " wall_s=" << fixed(g.wall_s, 2)
     << " lost_work_s=" << fixed(g.lost_work_s, 3) << " lost_steps=" << g.lost_steps
     << " step_s=" << fixed(g.step_s, 4);
  for (process::TimePart p : process::kAllTimeParts) os << " " << process::to_string(p) << "_s=" << fixed(g.kept[p], 2);
  os << " comm_init_s=" << fixed(g.kept.comm_init_s, 2) << " restart_other_s=" << fixed(g.restart_and_other_s, 2);
  return os.str();
}

std::vector<std::string> RunReport::summary(const GangOutcome& outcome, double wall_seconds,
                                            LedgerClock::time_point end) const {
  const JobGoodput ledger = goodput_.totals(end);
  // Time to target spans every attempt (from the first training step); the last attempt's own is shown beside it.
  const std::optional<double> to_target = goodput_.time_to_target_s() ? goodput_.time_to_target_s() : time_to_target_s_;
  std::vector<std::string> lines;
  lines.push_back("phase: " + std::string(api::to_string(outcome.phase)) +
                  (outcome.message.empty() ? "" : " (" + outcome.message + ")"));
  lines.push_back("final accuracy: " + (final_accuracy_ ? fixed(*final_accuracy_ * 100, 2) + "%" : "n/a"));
  if (target_) {
    std::string line = "time to " + fixed(*target_ * 100, 1) + "%: ";
    if (!to_target) {
      line += "not reached";
    } else {
      line += fixed(*to_target, 1) + " s from the first training step";
      if (outcome.attempts > 1 && time_to_target_s_) {
        line += ", across " + std::to_string(outcome.attempts) +
                " attempts (the last attempt's own: " + fixed(*time_to_target_s_, 1) + " s)";
      }
    }
    lines.push_back(line);
  }
  lines.push_back("throughput: " + fixed(images_per_s_, 0) + " images/s");
  lines.push_back("all-reduce bus bandwidth: " + fixed(busbw_gbps_, 2) + " GB/s" +
                  (algorithm_.empty() ? "" : " (" + algorithm_ + ")"));
  if (allreduce_calls_ > 0) {
    lines.push_back("all-reduce: " + algorithm_ + ", " + std::to_string(allreduce_calls_) + " calls, " +
                    std::to_string(allreduce_bytes_ / allreduce_calls_) + " bytes per call");
  }
  if (start_) lines.push_back(start_line(run_, start_->from.reason, start_->step, start_->from.run, start_->from.path));
  if (!left_to_train_.empty())
    lines.push_back("nothing left to train: " + left_to_train_ + " (see rank 0's log above)");
  lines.push_back(
      "restarts: " + std::to_string(std::max(outcome.attempts - 1, 0)) +
      (resumed_step_ && outcome.attempts > 1 ? ", the last resumed at step " + std::to_string(*resumed_step_) : ""));
  lines.push_back("wall time: " + format_duration(wall_seconds));
  lines.push_back(goodput_line(ledger));
  const std::optional<Straggler> straggler = stragglers_ ? stragglers_->worst() : std::nullopt;
  if (straggler) lines.push_back(straggler_line(*straggler));
  for (const AttemptLoss& l : ledger.losses) {
    lines.push_back("attempt " + std::to_string(l.attempt) + " lost " + std::to_string(l.reached_step - l.saved_step) +
                    " steps (step " + std::to_string(l.reached_step) + " back to the checkpoint of step " +
                    std::to_string(l.saved_step) + ") at " + fixed(l.step_s * 1000, 2) + " ms a step");
  }
  std::ostringstream result;
  result << "RESULT phase=" << api::to_string(outcome.phase)
         << " accuracy=" << (final_accuracy_ ? fixed(*final_accuracy_, 4) : "nan")
         << " time_to_target_s=" << (to_target ? fixed(*to_target, 1) : "nan")
         << " attempt_time_to_target_s=" << (time_to_target_s_ ? fixed(*time_to_target_s_, 1) : "nan")
         << " images_per_s=" << fixed(images_per_s_, 0) << " busbw_gbps=" << fixed(busbw_gbps_, 3)
         << " restarts=" << std::max(outcome.attempts - 1, 0);
  if (!algorithm_.empty()) result << " allreduce_algorithm=" << algorithm_;
  if (allreduce_calls_ > 0) result << " allreduce_bytes_per_call=" << allreduce_bytes_ / allreduce_calls_;
  result << goodput_fields(ledger);
  if (straggler)
    result << " straggler_rank=" << straggler->rank << " straggler_slowdown=" << fixed(straggler->slowdown, 2);
  if (outcome.reason != controller::Reason::kNone) result << " reason=" << controller::to_string(outcome.reason);
  if (!run_.empty()) result << " run=" << run_;
  if (start_) result << " start_step=" << start_->step;
  if (start_ && start_->from.reason == "ResumeFrom") result << " resumed_run=" << start_->from.run;
  if (!left_to_train_.empty()) result << " nothing_to_train=" << underscored(left_to_train_);
  lines.push_back(result.str());
  return lines;
}

}  // namespace torus::runtime
