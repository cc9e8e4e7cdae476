#include "common/process/goodput.h"

#include <algorithm>
#include <string>

namespace torus::process {

std::string_view to_string(TimePart part) {
  switch (part) {
    case TimePart::kStartup:
      return "startup";
    case TimePart::kRestore:
      return "restore";
    case TimePart::kTraining:
      return "training";
    case TimePart::kDataWait:
      return "data_wait";
    case TimePart::kCommWait:
      return "comm_wait";
    case TimePart::kEvaluation:
      return "evaluation";
    case TimePart::kCheckpoint:
      return "checkpoint";
  }
  return "unknown";
}

void RankLedger::add_step(double step_s, double data_wait_s, double comm_wait_s) {
  ++steps;
  step_seconds += step_s;
  // The first step builds the backend's primitives; the moving mean follows the last ~10 steps.
  if (steps > 1) recent_step_s = recent_step_s == 0 ? step_s : 0.9 * recent_step_s + 0.1 * step_s;
  (*this)[TimePart::kDataWait] += data_wait_s;
  (*this)[TimePart::kCommWait] += comm_wait_s;
  (*this)[TimePart::kTraining] += std::max(step_s - data_wait_s - comm_wait_s, 0.0);
}

}  // namespace torus::process
