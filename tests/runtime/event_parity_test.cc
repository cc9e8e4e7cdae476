// One run's events, written by the worker's own writer (worker/app/telemetry.h, as torus-worker writes them) and read
// by every reader the way the launchers read them: `torus run`'s console (its lines, the progress line, the epoch
// rows, the summary and the RESULT line), the goodput ledger, the straggler watch, and the operator's reading of a
// survivor's last words (controller::parse_last_words). Each figure the writer put in must come out of its reader:
// a reader that drops or misreads a field, or a writer that stops writing one, fails here.
#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/process/worker_events.h"
#include "operator/controller/gang_policy.h"
#include "operator/runtime/run_console.h"
#include "tests/support/temp_dir.h"
#include "worker/app/telemetry.h"

namespace torus::runtime {
namespace {

using worker::train::EventKind;
using TrainEvent = worker::train::ProgressEvent;

constexpr int64_t kResumedStep = 4;
constexpr int64_t kCheckpointStep = 60;
constexpr int64_t kLastStep = 64;
const std::string kCheckpointPath = "/ckpt/run-1/ckpt-60.torus";

worker::app::TelemetryOptions options(int rank) {
  worker::app::TelemetryOptions o;
  o.rank = rank;
  o.world_size = 2;
  o.run = "run-1";
  o.epochs = 2;
  o.total_steps = 200;
  o.target_accuracy = 0.5;
  o.event_interval = std::chrono::milliseconds(0);  // every step's event
  return o;
}

// A step of `rank`: rank 1 waits 3x longer for its data, so it arrives late at every all-reduce (a straggler).
TrainEvent step(int rank, int64_t global_step) {
  TrainEvent e;
  e.kind = EventKind::kStep;
  e.step = global_step;
  e.images = 32;
  e.step_seconds = 0.05;
  e.data_wait_seconds = rank == 1 ? 0.03 : 0.01;
  e.compute_seconds = 0.015;
  e.comm_wait_seconds = rank == 1 ? 0.001 : 0.02;
  e.elapsed_seconds = 0.05 * static_cast<double>(global_step - kResumedStep);
  e.fractional_epoch = static_cast<double>(global_step) / 100.0;
  e.loss = 0.75;
  e.lr = 0.125;
  e.images_per_second = 640;
  return e;
}

// What both ranks write, in order, as the lines a launcher reads from their stdout.
struct Written {
  std::vector<std::pair<int, std::string>> lines;  // (rank, line)
};

Written write_one_run() {
  worker::app::Telemetry rank0(options(0)), rank1(options(1));
  testing::internal::CaptureStdout();
  worker::train::Resumed resumed;
  resumed.reason = launch::ResumeReason::kThisRun;
  resumed.from_run = "run-1";
  resumed.path = "/ckpt/run-1/ckpt-4.torus";
  resumed.step = kResumedStep;
  rank0.started(resumed, worker::train::LeftToTrain::kSome, {.startup_s = 1.5, .comm_init_s = 0.5, .restore_s = 0.25});
  std::string text = testing::internal::GetCapturedStdout();
  Written w;
  auto take = [&w](int rank, const std::string& captured) {
    std::istringstream in(captured);
    for (std::string line; std::getline(in, line);) w.lines.emplace_back(rank, line);
  };
  take(0, text);
  testing::internal::CaptureStdout();
  rank1.started(resumed, worker::train::LeftToTrain::kSome, {});
  take(1, testing::internal::GetCapturedStdout());
  for (int64_t s = kResumedStep + 1; s <= kLastStep; ++s) {
    for (int rank : {0, 1}) {
      testing::internal::CaptureStdout();
      (rank == 0 ? rank0 : rank1).on_event(step(rank, s));
      take(rank, testing::internal::GetCapturedStdout());
    }
    if (s == kCheckpointStep) {
      TrainEvent c;
      c.kind = EventKind::kCheckpoint;
      c.step = s;
      c.epoch = 0;
      c.checkpoint_path = kCheckpointPath;
      c.checkpoint_seconds = 0.25;
      testing::internal::CaptureStdout();
      rank0.on_event(c);
      take(0, testing::internal::GetCapturedStdout());
    }
  }
  TrainEvent end;
  end.kind = EventKind::kEpochEnd;
  end.epoch = 0;
  end.loss = 0.7;
  end.images_per_second = 600;
  TrainEvent eval;
  eval.kind = EventKind::kEvaluation;
  eval.epoch = 0;
  eval.accuracy = 0.625;
  eval.top5 = 0.95;
  eval.loss = 0.5;
  eval.elapsed_seconds = 3.0;
  testing::internal::CaptureStdout();
  rank0.on_event(end);
  rank0.on_event(eval);
  take(0, testing::internal::GetCapturedStdout());
  // Rank 1's last words (its watchdog's), then rank 0's totals.
  testing::internal::CaptureStdout();
  rank1.aborted();
  take(1, testing::internal::GetCapturedStdout());
  worker::train::RunResult result;
  result.steps = kLastStep;
  result.epochs_completed = 1;
  result.last_eval.top1 = 0.625;
  result.last_eval.samples = 64;
  result.reached_target = true;
  result.seconds = 3.5;
  result.seconds_to_target = 3.0;
  testing::internal::CaptureStdout();
  rank0.finished(result, 1.5, "ring");
  take(0, testing::internal::GetCapturedStdout());
  return w;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(EventParity, EveryReaderGetsWhatTheWorkerWrote) {
  const Written written = write_one_run();
  // Every line the writer wrote reads as an event.
  std::string aborted_line;
  for (const auto& [rank, line] : written.lines) {
    std::string error;
    const auto e = process::parse_event(line, &error);
    ASSERT_TRUE(e) << "rank " << rank << ": " << line << ": " << error;
    if (std::holds_alternative<process::AbortedEvent>(*e)) aborted_line = line;
  }

  // The console: every line through it, as `torus run` feeds it.
  test::TempDir tmp("torus-event-parity");
  RankLogs logs(tmp.str(), 2);
  char* buffer = nullptr;
  size_t size = 0;
  FILE* out = ::open_memstream(&buffer, &size);
  ASSERT_NE(out, nullptr);
  std::string console_text, progress_line;
  std::vector<std::string> summary;
  std::optional<process::Straggler> worst;
  controller::LastWords last_words;
  JobGoodput goodput;
  {
    Console console(ConsoleOptions{.out = out}, logs);
    console.on_attempt_start(0);
    for (const auto& [rank, line] : written.lines) console.on_line(rank, process::Stream::kStdout, line);
    console.on_worker_exit(1, process::Termination{.exit_code = 43});
    progress_line = console.report().progress_line(BarStyle::kAscii);
    summary = console.report().summary(GangOutcome{api::Phase::kSucceeded, controller::Reason::kNone, "", 1}, 5);
    goodput = console.report().goodput().totals(LedgerClock::now());
    console.finish();
  }
  std::fflush(out);
  console_text.assign(buffer, size);
  std::fclose(out);
  std::free(buffer);
  std::string all_summary;
  for (const auto& l : summary) all_summary += l + "\n";

  // started: the run, where it resumed, the metrics port (none here), the target.
  EXPECT_TRUE(has(all_summary, "start: run run-1 resumed at step 4 from its own checkpoint /ckpt/run-1/ckpt-4.torus"))
      << all_summary;
  EXPECT_TRUE(has(all_summary, "time to 50.0%: ")) << "the target:\n" << all_summary;
  // progress: epoch (1-based) of epochs, step of steps, loss, the gang's images/s, the ETA.
  EXPECT_EQ(progress_line.substr(0, progress_line.find(" [")), "epoch 1/2") << progress_line;
  EXPECT_TRUE(has(progress_line, "step 64/200 · loss 0.750")) << progress_line;
  EXPECT_TRUE(has(progress_line, "1280 img/s")) << "640 a rank x 2 ranks: " << progress_line;
  EXPECT_TRUE(has(progress_line, "ETA 7s")) << "136 steps at 0.05 s: " << progress_line;
  // checkpoint: the path, on the console.
  EXPECT_TRUE(has(console_text, "checkpoint: " + kCheckpointPath)) << console_text;
  // evaluated: the epoch row (1-based), its own loss and images/s, validation loss and accuracy.
  EXPECT_TRUE(has(
      console_text,
      epoch_row(
          {.epoch = 1, .train_loss = 0.7, .images_per_s = 1200, .val_loss = 0.5, .accuracy = 0.625, .seconds = 3.0})))
      << console_text;
  // finished: accuracy, throughput, bus bandwidth, the algorithm, and the start step.
  const std::string& result = summary.back();
  for (const char* field : {"accuracy=0.6250", "images_per_s=1280", "busbw_gbps=1.500", "allreduce_algorithm=ring",
                            "run=run-1", "start_step=4", "straggler_rank=1"}) {
    EXPECT_TRUE(has(result, std::string(" ") + field)) << field << "\n" << result;
  }

  // The goodput ledger: rank 0's ledger of its checkpoint and last event, the survivor's last step.
  EXPECT_DOUBLE_EQ(goodput.kept[process::TimePart::kStartup], 1.5) << "the started event's ledger";
  EXPECT_DOUBLE_EQ(goodput.kept[process::TimePart::kRestore], 0.25);
  EXPECT_DOUBLE_EQ(goodput.kept.comm_init_s, 0.5);
  EXPECT_DOUBLE_EQ(goodput.kept[process::TimePart::kCheckpoint], 0.25) << "the checkpoint event's ledger";
  ASSERT_EQ(goodput.losses.size(), 1u) << "rank 1's exit failed the attempt";
  EXPECT_EQ(goodput.losses[0].saved_step, kCheckpointStep) << "the checkpoint event's step";
  EXPECT_EQ(goodput.losses[0].reached_step, kLastStep) << "the aborted event's step";

  // The operator: a survivor's last words under the reason in its termination message.
  last_words = controller::parse_last_words("rank 1: collective timeout\n" + aborted_line, 200);
  EXPECT_EQ(last_words.step, kLastStep);
}

}  // namespace
}  // namespace torus::runtime
