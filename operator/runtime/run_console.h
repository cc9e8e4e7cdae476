#pragma once
// What `torus run` shows on the console while the gang runs, and where the ranks' logs go.
//
// - Every rank's log (its ordinary output lines, not its `@torus-event` lines) goes to DIR/rank-N.log; the console
//   names rank 0's file (every rank's with --verbose) before the ranks start.
// - The console shows: rank 0's log lines (on a terminal only its start-up, up to its first training step: what it
//   runs), every rank's warnings and errors, each rank's metrics address, checkpoints, one row per finished epoch
//   (from rank 0's events), and a progress line with a bar and the ETA: redrawn in place on a terminal, printed as
//   whole lines at most about ten times a job (PlainProgressPacer) when the console is a pipe or a file.
// - A rank that fails first in an attempt is named with its exit code or signal and followed by the last lines of its
//   log; a rank that fails after it in the same attempt is named with its log's path.
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "operator/runtime/local_gang.h"
#include "operator/runtime/run_report.h"

namespace torus::runtime {

// A rank's log line as the console shows it: "[rank N] " first, and the rank's own log tag ("[rank N] ", after the
// time and level) taken out, so each tag is said once: "[rank 0] 2026-... I worker/app/worker_main.cc:295] ...".
std::string console_line(int rank, std::string_view line);

// "exited with code 43 (collective timeout)", "killed by SIGKILL (signal 9)".
std::string describe_exit(const process::Termination& how);

// The console's lines naming the rank logs: "logs: DIR/rank-0.log (rank 0; the others' beside it as rank-N.log)",
// or with `all` (--verbose) "rank N log: DIR/rank-N.log" for each rank.
std::vector<std::string> log_path_lines(const std::string& dir, int world_size, bool all);

// Each rank's log file, DIR/rank-N.log, written afresh by each run; a restart appends under an attempt marker.
class RankLogs {
 public:
  RankLogs(std::string dir, int world_size);
  const std::string& dir() const { return dir_; }
  int world_size() const { return static_cast<int>(files_.size()); }
  std::string path(int rank) const;
  void write(int rank, std::string_view line);  // flushed at once: `tail -f` and a failure's reader see it now
  void mark_attempt(int attempt);

 private:
  std::string dir_;
  std::vector<std::ofstream> files_;
};

struct ConsoleOptions {
  bool all_ranks = false;  // --verbose: every rank's log lines and every log path
  bool terminal = false;   // redraw the progress line in place (stderr is a TTY)
  int columns = 0;         // the terminal's width (0: unknown); a redrawn line is cut to it
  FILE* out = stderr;
};

class Console : public GangListener {
 public:
  Console(const ConsoleOptions& options, RankLogs& logs);

  RunReport& report() { return report_; }

  void on_attempt_start(int attempt) override;
  void on_line(int rank, process::Stream, std::string_view line) override;
  void on_worker_exit(int rank, const process::Termination& how) override;
  void on_restart(const controller::Decision& why) override { say(why.message); }
  void on_interrupt(int count) override;
  void on_tick() override;

  // A line of torus's own, above the progress line.
  void say(const std::string& text);
  void finish() { clear_progress(); }

 private:
  static constexpr size_t kTailLines = 10;

  bool echoes(int rank, std::string_view line) const;
  void on_event(int rank, const process::WorkerEvent& event);
  void show_progress(bool fresh_figures);
  void print_new_epoch_rows();
  void draw_progress();
  void clear_progress();

  ConsoleOptions options_;
  RankLogs& logs_;
  RunReport report_;
  PlainProgressPacer pacer_;
  std::vector<std::deque<std::string>> tails_;  // each rank's last log lines of this attempt
  int attempt_ = 0;
  bool rank0_training_ = false;  // rank 0 sent a progress event this attempt
  bool failure_shown_ = false;   // this attempt's first failure was shown with its log's tail
  bool progress_shown_ = false;
  bool interrupted_ = false;
  bool event_warning_shown_ = false;  // an event line that did not read was said once
  size_t rows_printed_ = 0;
};

}  // namespace torus::runtime
