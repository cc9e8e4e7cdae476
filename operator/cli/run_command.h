#pragma once
#include <string>
#include <vector>

namespace torus::cli {

inline constexpr const char* kRunSummary = "run a TrainingJob file as local worker processes";
inline constexpr const char* kRunUsage =
    "usage: torus run FILE [--workers N] [--set path=value ...] [--log-dir DIR] [--verbose]\n"
    "\n"
    "Runs the TrainingJob in FILE here, as local processes (one per rank), with the same rank environment,\n"
    "rendezvous, all-reduce, checkpoints and gang restarts as in Kubernetes pods.\n"
    "\n"
    "  --workers N         override spec.gang.workers\n"
    "  --set path=value    override any field, e.g. --set spec.training.epochs=2 (repeatable)\n"
    "  --log-dir DIR       write each rank's log to DIR/rank-N.log (default: a new folder under\n"
    "                      $TMPDIR/torus-logs, named for the job and the time; printed before the ranks start)\n"
    "  --verbose           show every rank's log lines, not only rank 0's, and list every rank's log file\n"
    "\n"
    "The console shows rank 0's log (on a terminal only its start-up), every rank's warnings and errors, one row per\n"
    "finished epoch, and a progress line with the ETA; a failing rank is named with its exit code or signal and the\n"
    "last lines of its log.\n"
    "\n"
    "Ctrl-C asks the workers to checkpoint and stop (run again to resume); a second Ctrl-C kills them.\n"
    "The last line printed is machine-readable: RESULT phase=... accuracy=... time_to_target_s=... "
    "images_per_s=... busbw_gbps=... restarts=...\n"
    "Exit code: 0 Succeeded, 1 Failed or invalid job, 130 interrupted.\n";

int run_command(const std::vector<std::string>& args);

}  // namespace torus::cli
