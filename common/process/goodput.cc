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

nlohmann::json to_json(const RankLedger& ledger) {
  nlohmann::json j = nlohmann::json::object();
  for (TimePart p : kAllTimeParts) j[std::string(to_string(p)) + "_s"] = ledger[p];
  j["comm_init_s"] = ledger.comm_init_s;
  j["steps"] = ledger.steps;
  j["step_s"] = ledger.step_seconds;
  j["recent_step_s"] = ledger.recent_step_s;
  return j;
}

namespace {
template <typename T>
T number_or_zero(const nlohmann::json& j, const std::string& key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<T>() : T{};
}
}  // namespace

RankLedger rank_ledger_from_json(const nlohmann::json& j) {
  RankLedger l;
  if (!j.is_object()) return l;
  for (TimePart p : kAllTimeParts) l[p] = number_or_zero<double>(j, std::string(to_string(p)) + "_s");
  l.comm_init_s = number_or_zero<double>(j, "comm_init_s");
  l.steps = number_or_zero<int64_t>(j, "steps");
  l.step_seconds = number_or_zero<double>(j, "step_s");
  l.recent_step_s = number_or_zero<double>(j, "recent_step_s");
  return l;
}

}  // namespace torus::process
