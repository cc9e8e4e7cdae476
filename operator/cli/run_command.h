#pragma once
#include <string>
#include <vector>

namespace torus::cli {

inline constexpr const char* kRunSummary = "run a TrainingJob file as local worker processes";
inline constexpr const char* kRunUsage =
    "usage: torus run FILE [--workers N] [--set path=value ...] [--resume] [--log-dir DIR] [--verbose]\n"
    "\n"
    "Runs the TrainingJob in FILE here, as local processes (one per rank), with the same rank environment,\n"
    "rendezvous, all-reduce, checkpoints and gang restarts as in Kubernetes pods.\n"
    "\n"
    "  --workers N         override spec.gang.workers\n"
    "  --set path=value    override any field, e.g. --set spec.training.epochs=2 (repeatable)\n"
    "  --resume            start from the newest checkpoint another run left in spec.training.checkpoint.dir\n"
    "                      (--set spec.training.checkpoint.resumeFrom=latest; a run id there picks that run)\n"
    "  --log-dir DIR       write each rank's log to DIR/rank-N.log (default: a new folder under\n"
    "                      $TMPDIR/torus-logs, named for the job and the time; printed before the ranks start)\n"
    "  --verbose           show every rank's log lines, not only rank 0's, and list every rank's log file\n"
    "\n"
    "The console shows rank 0's log (on a terminal only its start-up), every rank's warnings and errors, one row per\n"
    "finished epoch, and a progress line with the ETA; a failing rank is named with its exit code or signal and the\n"
    "last lines of its log.\n"
    "\n"
    "Each run is new: it trains from step 0 and keeps its checkpoints in DIR/<run id> (the run id is printed first\n"
    "and in the RESULT line), so it never resumes another run unless --resume (or resumeFrom) asks.\n"
    "Ctrl-C asks the workers to checkpoint and stop (run again with --resume to continue); a second Ctrl-C kills "
    "them.\n"
    "The last line printed is machine-readable: RESULT phase=... accuracy=... time_to_target_s=... "
    "images_per_s=... busbw_gbps=... restarts=... run=... start_step=...\n"
    "Exit code: 0 Succeeded, 1 Failed or invalid job, 130 interrupted.\n";

int run_command(const std::vector<std::string>& args);

}  // namespace torus::cli
