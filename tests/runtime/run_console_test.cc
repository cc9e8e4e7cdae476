// What `torus run` prints while the gang runs: the progress bar, the epoch rows, the pacing of a plain console, the
// rank logs and their paths, and a failing rank's last lines. Pure formatting is table-driven; the Console is fed
// worker events and log lines as run_local_gang would and writes to a memory stream.
#include "operator/runtime/run_console.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/process/worker_events.h"
#include "tests/support/temp_dir.h"

namespace torus::runtime {
namespace {

TEST(ProgressBar, FillsEighthsOnATerminalAndWholeCellsInAscii) {
  struct Case {
    double fraction;
    int cells;
    BarStyle style;
    const char* bar;
  };
  const Case cases[] = {
      {0.0, 4, BarStyle::kUnicode, "|    |"},   {1.0, 4, BarStyle::kUnicode, "|████|"},
      {0.5, 4, BarStyle::kUnicode, "|██  |"},   {0.3, 4, BarStyle::kUnicode, "|█▏  |"},  // 9.6 eighths
      {0.99, 4, BarStyle::kUnicode, "|███▉|"},  {1.7, 4, BarStyle::kUnicode, "|████|"},  // clamped
      {-1, 4, BarStyle::kUnicode, "|    |"},    {0.0, 4, BarStyle::kAscii, "[    ]"},
      {0.5, 4, BarStyle::kAscii, "[##  ]"},     {0.99, 4, BarStyle::kAscii, "[### ]"},
      {1.0, 4, BarStyle::kAscii, "[####]"},
  };
  for (const Case& c : cases) EXPECT_EQ(progress_bar(c.fraction, c.cells, c.style), c.bar) << c.fraction;
}

TEST(EpochRow, ColumnsAlignUnderTheHeaderAndMissingFiguresAreDashes) {
  struct Case {
    EpochRow row;
    const char* text;
  };
  const Case cases[] = {
      {{1, 1.31838, 3537.4, 0.291676, 0.796875, 0.46}, "    1      1.3184    0.2917   79.69%      3537     0.5s"},
      {{12, std::nullopt, std::nullopt, 0.0075, 1.0, 0.4}, "   12           -    0.0075  100.00%         -     0.4s"},
      {{3, 0.5, 120000, 0.25, 0.5, 125}, "    3      0.5000    0.2500   50.00%    120000    2m05s"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(epoch_row(c.row), c.text);
    EXPECT_EQ(epoch_row(c.row).size(), epoch_header().size()) << "the row is as wide as the header";
  }
}

TEST(EpochRows, ComeFromRankZerosProgressAndEvaluationEvents) {
  RunReport r;
  r.on_attempt_start(0);
  auto progress = [&](int rank, int epoch, double loss, double ips) {
    r.on_event(rank, process::ProgressEvent{.rank = rank, .epoch = epoch, .loss = loss, .images_per_s = ips});
  };
  progress(0, 1, 2.0, 100);
  progress(1, 1, 9.0, 900);  // another rank's figures are its own, not the gang's
  progress(0, 1, 1.0, 300);
  r.on_event(0, process::EvaluatedEvent{.epoch = 1, .accuracy = 0.7, .loss = 0.8, .elapsed_s = 10.0});
  r.on_event(0, process::EvaluatedEvent{.epoch = 2, .accuracy = 0.8, .loss = 0.6, .elapsed_s = 14.5});
  r.on_attempt_start(1);  // the restarted attempt's trainer clock starts again
  progress(0, 3, 0.5, 400);
  r.on_event(0, process::EvaluatedEvent{.epoch = 3, .accuracy = 0.9, .loss = 0.4, .elapsed_s = 3.0});
  const auto& rows = r.epochs();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].epoch, 1);
  EXPECT_DOUBLE_EQ(*rows[0].train_loss, 1.5);
  EXPECT_DOUBLE_EQ(*rows[0].images_per_s, 300);
  EXPECT_DOUBLE_EQ(rows[0].seconds, 10.0);
  EXPECT_FALSE(rows[1].train_loss) << "no progress event in epoch 2";
  EXPECT_DOUBLE_EQ(rows[1].seconds, 4.5);
  EXPECT_DOUBLE_EQ(rows[1].accuracy, 0.8);
  EXPECT_DOUBLE_EQ(rows[2].seconds, 3.0);
  EXPECT_DOUBLE_EQ(*rows[2].train_loss, 0.5);
}

// A worker that reports the epoch's own figures with its evaluation (the trainer's mean step loss and the gang's
// rate over the epoch) is believed over the progress samples, and fills the row of an epoch too short for any.
TEST(EpochRows, TheEvaluationsOwnEpochFiguresWin) {
  RunReport r;
  r.on_attempt_start(0);
  r.on_event(0, process::ProgressEvent{.epoch = 1, .loss = 2.0, .images_per_s = 100});
  r.on_event(
      0, process::EvaluatedEvent{
             .epoch = 1, .accuracy = 0.7, .loss = 0.8, .elapsed_s = 1.0, .train_loss = 1.25, .images_per_s = 5000.0});
  r.on_event(
      0, process::EvaluatedEvent{
             .epoch = 2, .accuracy = 0.8, .loss = 0.6, .elapsed_s = 1.4, .train_loss = 0.75, .images_per_s = 6000.0});
  const auto& rows = r.epochs();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(*rows[0].train_loss, 1.25);
  EXPECT_DOUBLE_EQ(*rows[0].images_per_s, 5000.0);
  EXPECT_DOUBLE_EQ(*rows[1].train_loss, 0.75);
  EXPECT_DOUBLE_EQ(*rows[1].images_per_s, 6000.0);
}

TEST(FitToWidth, CutsCodePointsNotBytes) {
  struct Case {
    std::string line;
    int columns;
    std::string fitted;
  };
  const Case cases[] = {
      {"abcdef", 4, "abcd"}, {"abc", 4, "abc"},  {"a·b·c", 3, "a·b"},
      {"██▌ x", 3, "██▌"},   {"abc", 0, "abc"},  // unknown width: as it is
  };
  for (const Case& c : cases) EXPECT_EQ(fit_to_width(c.line, c.columns), c.fitted) << c.line;
}

TEST(PlainProgressPacer, PrintsTheFirstLineThenEachTenthOrAfterTheInterval) {
  PlainProgressPacer pacer(std::chrono::seconds(60));
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  struct Case {
    double fraction;
    int at_s;
    bool due;
  };
  const Case cases[] = {
      {0.00, 0, true},    // the first: training has started
      {0.05, 1, false},   // same tenth, soon after
      {0.10, 2, true},    // a tenth crossed
      {0.19, 30, false},  //
      {0.19, 61, false},  // 59 s since the line at 2 s
      {0.19, 62, true},   // a minute without a line
      {0.95, 64, true},   // many tenths at once: one line
      {0.40, 65, true},   // a restart went back to the checkpoint
  };
  for (const Case& c : cases) {
    EXPECT_EQ(pacer.due(c.fraction, t0 + std::chrono::seconds(c.at_s)), c.due) << c.fraction << " at " << c.at_s;
  }
}

TEST(DescribeExit, NamesTheSignalOrTheCodeAndWhatItMeans) {
  struct Case {
    int exit_code, signal;
    const char* text;
  };
  const Case cases[] = {
      {0, SIGKILL, "killed by SIGKILL (signal 9)"},
      {0, SIGSEGV, "killed by SIGSEGV (signal 11)"},
      {1, 0, "exited with code 1 (permanent failure)"},
      {42, 0, "exited with code 42 (retryable: a peer failed or it was asked to stop)"},
      {43, 0, "exited with code 43 (collective timeout)"},
      {7, 0, "exited with code 7"},
  };
  for (const Case& c : cases) {
    process::Termination t;
    t.exit_code = c.exit_code;
    t.signal = c.signal;
    EXPECT_EQ(describe_exit(t), c.text);
  }
}

TEST(LogPathLines, RankZerosByDefaultEveryRanksWithVerbose) {
  EXPECT_EQ(log_path_lines("/l", 1, false), (std::vector<std::string>{"log: /l/rank-0.log"}));
  EXPECT_EQ(log_path_lines("/l", 3, false),
            (std::vector<std::string>{
                "logs: /l/rank-0.log (rank 0; the others' beside it as rank-N.log, --verbose lists them)"}));
  EXPECT_EQ(log_path_lines("/l", 3, true), (std::vector<std::string>{"rank 0 log: /l/rank-0.log",
                                                                     "rank 1 log: /l/rank-1.log",
                                                                     "rank 2 log: /l/rank-2.log"}));
}

// A Console writing to memory, over rank logs in a temporary folder.
struct ConsoleRig {
  explicit ConsoleRig(bool terminal, bool all_ranks = false)
      : tmp("run-console"), logs((tmp.path() / "logs").string(), 2) {
    out = ::open_memstream(&buffer, &size);
    console.emplace(ConsoleOptions{all_ranks, terminal, 80, out}, logs);
    console->on_attempt_start(0);
  }
  ~ConsoleRig() {
    console.reset();
    std::fclose(out);
    std::free(buffer);
  }
  std::string text() {
    std::fflush(out);
    return std::string(buffer, size);
  }
  void event(int rank, const process::WorkerEvent& e) {
    console->on_line(rank, process::Stream::kStdout, process::format_event(e));
  }
  void log(int rank, const std::string& line) { console->on_line(rank, process::Stream::kStderr, line); }
  static std::string file(const std::string& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  }

  test::TempDir tmp;
  RankLogs logs;
  char* buffer = nullptr;
  size_t size = 0;
  FILE* out = nullptr;
  std::optional<Console> console;
};

const process::ProgressEvent kProgress = {
    .epoch = 1, .epochs = 2, .step = 5, .steps_total = 10, .loss = 0.5, .images_per_s = 100};
const std::string kWarning = "2026-01-01T00:00:00.000Z W x.cc:1] slow disk";

TEST(Console, APipeGetsRankZerosLogAndEveryRanksWarningsAndEveryLogFileHoldsItsRank) {
  ConsoleRig rig(/*terminal=*/false);
  rig.log(0, "rank zero starts");
  rig.log(1, "rank one starts");
  rig.log(1, kWarning);
  rig.event(0, kProgress);
  rig.log(0, "rank zero trains");
  rig.event(0, process::EvaluatedEvent{.epoch = 1, .accuracy = 0.5, .loss = 0.4, .elapsed_s = 2.0});
  const std::string text = rig.text();
  EXPECT_NE(text.find("[rank 0] rank zero starts\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 0] rank zero trains\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("rank one starts"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 1] " + kWarning + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("epoch 1/2 [##########          ]  50% · step 5/10"), std::string::npos) << text;
  EXPECT_NE(text.find(epoch_header() + "\n    1      0.5000"), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << "no redraws in a pipe";
  EXPECT_EQ(ConsoleRig::file(rig.logs.path(0)), "rank zero starts\nrank zero trains\n");
  EXPECT_EQ(ConsoleRig::file(rig.logs.path(1)), "rank one starts\n" + kWarning + "\n");
}

TEST(Console, ATerminalShowsRankZerosStartUpThenRedrawsTheBar) {
  ConsoleRig rig(/*terminal=*/true);
  rig.log(0, "rank zero starts");
  rig.event(0, kProgress);
  rig.log(0, "rank zero trains");
  const std::string text = rig.text();
  EXPECT_NE(text.find("[rank 0] rank zero starts\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("rank zero trains"), std::string::npos) << "its log file has it:\n" << text;
  EXPECT_NE(text.find("\r\033[Kepoch 1/2 |██████████          |  50%"), std::string::npos) << text;
  EXPECT_EQ(ConsoleRig::file(rig.logs.path(0)), "rank zero starts\nrank zero trains\n");
}

TEST(Console, VerboseShowsEveryRanksLines) {
  ConsoleRig rig(/*terminal=*/false, /*all_ranks=*/true);
  rig.log(1, "rank one starts");
  EXPECT_NE(rig.text().find("[rank 1] rank one starts\n"), std::string::npos) << rig.text();
}

// An event line of another build (a field renamed or missing) is not silently dropped: the console says so, once.
TEST(Console, AnEventLineThatDoesNotReadIsSaidOnce) {
  ConsoleRig rig(/*terminal=*/false);
  rig.log(0, "@torus-event {\"event\":\"progress\",\"rank\":0,\"epoch\":1}");
  rig.log(0, "@torus-event {\"event\":\"progres\",\"rank\":0}");
  const std::string text = rig.text();
  const std::string said = "torus run: rank 0 wrote an event this torus cannot read (progress.epochs: missing)";
  EXPECT_NE(text.find(said), std::string::npos) << text;
  EXPECT_EQ(text.find("cannot read", text.find(said) + said.size()), std::string::npos) << "said once:\n" << text;
}

// A worker tags its log lines with its rank (common/log); the console's prefix says it already: each tag once.
TEST(Console, ARanksOwnTagIsNotRepeated) {
  EXPECT_EQ(console_line(0, "2026-01-01T00:00:00.000Z I [rank 0] worker/x.cc:1] starts"),
            "[rank 0] 2026-01-01T00:00:00.000Z I worker/x.cc:1] starts");
  EXPECT_EQ(console_line(1, "plain line"), "[rank 1] plain line");
  EXPECT_EQ(console_line(1, "W [rank 10] x.cc:1] not this rank's tag"),
            "[rank 1] W [rank 10] x.cc:1] not this rank's tag");
  ConsoleRig rig(/*terminal=*/false, /*all_ranks=*/true);
  rig.log(1, "2026-01-01T00:00:00.000Z W [rank 1] x.cc:1] slow disk");
  EXPECT_NE(rig.text().find("[rank 1] 2026-01-01T00:00:00.000Z W x.cc:1] slow disk\n"), std::string::npos)
      << rig.text();
  EXPECT_EQ(ConsoleRig::file(rig.logs.path(1)), "2026-01-01T00:00:00.000Z W [rank 1] x.cc:1] slow disk\n")
      << "the log file keeps the line as written";
}

TEST(Console, TheFirstFailureShowsItsRankSignalAndLastLinesTheNextItsLogPath) {
  ConsoleRig rig(/*terminal=*/false);
  for (int i = 0; i < 15; ++i) rig.log(1, "line " + std::to_string(i));
  process::Termination killed;
  killed.signal = SIGKILL;
  rig.console->on_worker_exit(1, killed);
  process::Termination retry;
  retry.exit_code = 42;
  rig.console->on_worker_exit(0, retry);
  const std::string text = rig.text();
  EXPECT_NE(text.find("rank 1 killed by SIGKILL (signal 9); the last 10 lines of its log, " + rig.logs.path(1) +
                      ":\n[rank 1] line 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[rank 1] line 14\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("line 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0 exited with code 42 (retryable: a peer failed or it was asked to stop) (log: " +
                      rig.logs.path(0) + ")"),
            std::string::npos)
      << text;
  // A new attempt: its first failure is shown again, and the logs mark where it began.
  rig.console->on_attempt_start(1);
  rig.log(1, "again");
  rig.console->on_worker_exit(1, killed);
  EXPECT_NE(rig.text().find("the last line of its log, " + rig.logs.path(1) + ":\n[rank 1] again\n"),
            std::string::npos)
      << rig.text();
  EXPECT_NE(ConsoleRig::file(rig.logs.path(1)).find("line 14\n---- torus run: attempt 1 ----\nagain\n"),
            std::string::npos);
}

}  // namespace
}  // namespace torus::runtime
