#include "operator/controller/termination_grace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

namespace torus::controller {

GraceInputs grace_inputs(const api::TrainingJobStatus& status) {
  GraceInputs in;
  in.step_seconds = status.goodput.step_seconds;
  in.save_seconds = status.goodput.slowest_checkpoint_seconds;
  // Each completed epoch was evaluated once; the ledger sums those passes over every attempt.
  if (status.progress.epoch > 0) in.evaluation_seconds = status.goodput.seconds.evaluation / status.progress.epoch;
  return in;
}

namespace {

bool measured(double s) { return std::isfinite(s) && s > 0; }

std::string shortest(double v) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

}  // namespace

int64_t derive_termination_grace(const GraceInputs& in) {
  if (!measured(in.step_seconds) || !measured(in.save_seconds)) return kUnmeasuredGraceSeconds;
  const double evaluation = measured(in.evaluation_seconds) ? in.evaluation_seconds : 0;
  const double need = evaluation + in.step_seconds + 2 * in.save_seconds;
  const double grace = std::ceil(kGraceMarginFactor * need) + static_cast<double>(kGraceSlackSeconds);
  // A figure so large it is no duration (a corrupt status) must not overflow: a day is more than any save.
  constexpr double kDay = 86400;
  return std::max(kGraceFloorSeconds, static_cast<int64_t>(std::min(grace, kDay)));
}

std::optional<int64_t> user_termination_grace(const api::TrainingJob& job) {
  const nlohmann::json& t = job.spec.gang.pod_template;
  if (!t.is_object() || !t.contains("spec") || !t["spec"].is_object()) return std::nullopt;
  const auto it = t["spec"].find("terminationGracePeriodSeconds");
  if (it == t["spec"].end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<int64_t>();
}

int64_t termination_grace_for(const api::TrainingJob& job) {
  return user_termination_grace(job).value_or(derive_termination_grace(grace_inputs(job.status)));
}

std::string describe_grace(const api::TrainingJob& job) {
  if (user_termination_grace(job)) return "spec.gang.template";
  const GraceInputs in = grace_inputs(job.status);
  if (!measured(in.step_seconds) || !measured(in.save_seconds)) return "unmeasured";
  return "step " + shortest(in.step_seconds) + " s, save " + shortest(in.save_seconds) + " s, evaluation " +
         shortest(in.evaluation_seconds) + " s";
}

}  // namespace torus::controller
