#include "operator/runtime/run_console.h"

#include <string.h>

#include <filesystem>

#include "common/launch/exit_codes.h"
#include "common/process/worker_events.h"
#include "common/util/error.h"

namespace torus::runtime {
namespace {

// TLOG lines read "<timestamp>Z W ..." / "<timestamp>Z E ...": the level is the log's own structure, not its text.
bool is_warning_or_error(std::string_view line) {
  const auto z = line.find("Z ");
  return z != std::string_view::npos && z + 3 < line.size() && (line[z + 2] == 'W' || line[z + 2] == 'E') &&
         line[z + 3] == ' ';
}

const char* exit_code_meaning(int code) {
  switch (static_cast<launch::ExitCode>(code)) {
    case launch::ExitCode::kFailure: return "permanent failure";
    case launch::ExitCode::kRetryable: return "retryable: a peer failed or it was asked to stop";
    case launch::ExitCode::kCollectiveTimeout: return "collective timeout";
    case launch::ExitCode::kCheckpointLost: return "checkpoint lost";
    default: return nullptr;
  }
}

std::string rank_prefix(int rank) { return "[rank " + std::to_string(rank) + "] "; }

}  // namespace

std::string console_line(int rank, std::string_view line) {
  const std::string prefix = rank_prefix(rank);
  std::string out = prefix + std::string(line);
  // The rank's own log tag (common/log: "... I [rank 0] file:line] ...") repeats the prefix: shown once.
  const size_t own = out.find(prefix, prefix.size());
  if (own != std::string::npos) out.erase(own, prefix.size());
  return out;
}

std::string describe_exit(const process::Termination& how) {
  if (how.signal != 0) {
    const char* abbrev = ::sigabbrev_np(how.signal);
    return std::string("killed by ") + (abbrev ? std::string("SIG") + abbrev : "a signal") + " (signal " +
           std::to_string(how.signal) + ")";
  }
  std::string text = "exited with code " + std::to_string(how.exit_code);
  if (const char* meaning = exit_code_meaning(how.exit_code)) text += std::string(" (") + meaning + ")";
  return text;
}

std::vector<std::string> log_path_lines(const std::string& dir, int world_size, bool all) {
  const std::string first = (std::filesystem::path(dir) / "rank-0.log").string();
  if (world_size == 1) return {"log: " + first};
  if (!all) return {"logs: " + first + " (rank 0; the others' beside it as rank-N.log, --verbose lists them)"};
  std::vector<std::string> lines;
  for (int r = 0; r < world_size; ++r)
    lines.push_back("rank " + std::to_string(r) + " log: " +
                    (std::filesystem::path(dir) / ("rank-" + std::to_string(r) + ".log")).string());
  return lines;
}

RankLogs::RankLogs(std::string dir, int world_size) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw SystemError("cannot create the log directory " + dir_ + ": " + ec.message());
  for (int r = 0; r < world_size; ++r) {
    files_.emplace_back(path(r), std::ios::trunc);
    if (!files_.back()) throw SystemError("cannot write " + path(r));
  }
}

std::string RankLogs::path(int rank) const {
  return (std::filesystem::path(dir_) / ("rank-" + std::to_string(rank) + ".log")).string();
}

void RankLogs::write(int rank, std::string_view line) {
  std::ofstream& f = files_.at(static_cast<size_t>(rank));
  f << line << '\n';
  f.flush();
}

void RankLogs::mark_attempt(int attempt) {
  for (std::ofstream& f : files_) f << "---- torus run: attempt " << attempt << " ----" << std::endl;
}

Console::Console(const ConsoleOptions& options, RankLogs& logs)
    : options_(options), logs_(logs), tails_(static_cast<size_t>(logs.world_size())) {}

void Console::on_attempt_start(int attempt) {
  attempt_ = attempt;
  rank0_training_ = false;
  failure_shown_ = false;
  for (auto& tail : tails_) tail.clear();
  report_.on_attempt_start(attempt);
  if (attempt > 0) {
    logs_.mark_attempt(attempt);
    say("attempt " + std::to_string(attempt) + ": restarting every rank from the last checkpoint");
  }
}

void Console::on_line(int rank, process::Stream, std::string_view line) {
  std::string unreadable;
  if (auto event = process::parse_event(line, &unreadable)) {
    on_event(rank, *event);
    return;
  }
  if (!unreadable.empty() && !event_warning_shown_) {
    // A worker of another build, most likely: its figures would be missing from the summary, so say why.
    event_warning_shown_ = true;
    say("torus run: rank " + std::to_string(rank) + " wrote an event this torus cannot read (" + unreadable +
        "); is torus-worker from the same build?");
  }
  logs_.write(rank, line);
  auto& tail = tails_.at(static_cast<size_t>(rank));
  tail.emplace_back(line);
  if (tail.size() > kTailLines) tail.pop_front();
  if (echoes(rank, line)) say(console_line(rank, line));
}

// Rank 0 speaks for the gang: a pipe (a CI log, kept when the machine is gone) gets all its lines; a terminal its
// start-up (what it runs), after which the epoch rows and the progress line say the rest and its log file holds it.
bool Console::echoes(int rank, std::string_view line) const {
  if (options_.all_ranks || is_warning_or_error(line)) return true;
  if (rank != 0) return false;
  return !options_.terminal || (attempt_ == 0 && !rank0_training_);
}

void Console::on_worker_exit(int rank, const process::Termination& how) {
  if (how.success() || interrupted_) return;
  report_.on_rank_failed();
  const std::string who = "rank " + std::to_string(rank) + " " + describe_exit(how);
  if (failure_shown_) {  // the attempt's first failure was shown; this one most likely follows from it
    say(who + " (log: " + logs_.path(rank) + ")");
    return;
  }
  failure_shown_ = true;
  const auto& tail = tails_.at(static_cast<size_t>(rank));
  const std::string what = tail.empty()       ? "its log is empty"
                           : tail.size() == 1 ? "the last line of its log"
                                              : "the last " + std::to_string(tail.size()) + " lines of its log";
  say(who + "; " + what + ", " + logs_.path(rank) + (tail.empty() ? "" : ":"));
  for (const auto& l : tail) say(console_line(rank, l));
}

void Console::on_interrupt(int count) {
  interrupted_ = true;
  say(count == 1 ? "interrupted: asking workers to checkpoint and stop (Ctrl-C again to kill)"
                 : "interrupted again: killing workers");
}

void Console::on_tick() { show_progress(false); }

void Console::say(const std::string& text) {
  clear_progress();
  std::fprintf(options_.out, "%s\n", text.c_str());
  if (options_.terminal && rank0_training_) draw_progress();
}

void Console::on_event(int rank, const process::WorkerEvent& event) {
  if (auto straggler = report_.on_event(rank, event)) say(straggler_line(*straggler));
  if (const auto* started = std::get_if<process::StartedEvent>(&event); started && started->metrics_port) {
    say("rank " + std::to_string(rank) + " metrics: http://127.0.0.1:" + std::to_string(*started->metrics_port) +
        "/metrics");
  }
  if (rank != 0) return;
  if (std::holds_alternative<process::ProgressEvent>(event)) {
    rank0_training_ = true;
    show_progress(true);
  } else if (std::holds_alternative<process::EvaluatedEvent>(event)) {
    print_new_epoch_rows();
  } else if (const auto* checkpoint = std::get_if<process::CheckpointEvent>(&event)) {
    say("checkpoint: " + checkpoint->path);
  }
}

// A terminal redraws the line at each progress event and tick; a pipe gets a whole line when the pacer says so.
void Console::show_progress(bool fresh_figures) {
  if (!rank0_training_) return;
  if (options_.terminal) {
    draw_progress();
  } else if (fresh_figures && pacer_.due(report_.fraction_done(), std::chrono::steady_clock::now())) {
    std::fprintf(options_.out, "%s\n", report_.progress_line(BarStyle::kAscii).c_str());
  }
}

void Console::print_new_epoch_rows() {
  const auto& rows = report_.epochs();
  for (; rows_printed_ < rows.size(); ++rows_printed_) {
    if (rows_printed_ == 0) say(epoch_header());
    say(epoch_row(rows[rows_printed_]));
  }
}

void Console::draw_progress() {
  const std::string line = fit_to_width(report_.progress_line(BarStyle::kUnicode), options_.columns - 1);
  std::fprintf(options_.out, "\r\033[K%s", line.c_str());
  std::fflush(options_.out);
  progress_shown_ = true;
}

void Console::clear_progress() {
  if (!progress_shown_) return;
  std::fprintf(options_.out, "\r\033[K");
  progress_shown_ = false;
}

}  // namespace torus::runtime
