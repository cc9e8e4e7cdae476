#include "operator/controller/progress.h"

#include <cmath>
#include <sstream>

#include "common/launch/checkpoint_layout.h"
#include "common/metrics/metric_names.h"
#include "common/metrics/rates.h"
#include "operator/controller/time_util.h"

namespace torus::controller {
namespace {

std::optional<double> sample(const std::map<std::string, double>& s, const std::string& name) {
  auto it = s.find(name);
  if (it == s.end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

// The algorithm of the gang-wide ("global") all-reduce series that carried the most bytes.
std::string busiest_algorithm(const std::map<std::string, double>& s) {
  const std::string family = std::string(metrics::name::kWorkerAllreduceBytesTotal) + "{";
  std::string best;
  double best_bytes = 0;
  for (auto it = s.lower_bound(family); it != s.end() && it->first.starts_with(family); ++it) {
    if (label_of(it->first, "level") != metrics::name::kLevelWholeAllReduce || !(it->second > best_bytes)) continue;
    best_bytes = it->second;
    best = label_of(it->first, "algorithm");
  }
  return best;
}

}  // namespace

std::string label_of(const std::string& series, const std::string& label) {
  const std::string key = label + "=\"";
  for (size_t at = series.find(key); at != std::string::npos; at = series.find(key, at + 1)) {
    if (at == 0 || (series[at - 1] != '{' && series[at - 1] != ',')) continue;
    const size_t begin = at + key.size();
    const size_t end = series.find('"', begin);
    return end == std::string::npos ? "" : series.substr(begin, end - begin);
  }
  return "";
}

std::map<std::string, double> parse_prometheus_text(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    std::string name = line.substr(0, name_end);
    size_t value_start = line[name_end] == '{' ? line.find('}', name_end) : name_end;
    if (value_start == std::string::npos) continue;
    value_start = line.find_first_not_of(' ', value_start + (line[name_end] == '{' ? 1 : 0));
    if (value_start == std::string::npos) continue;
    char* end = nullptr;
    double v = std::strtod(line.c_str() + value_start, &end);
    if (end == line.c_str() + value_start) continue;
    out.emplace(name, v);  // keeps the first series of a name
    if (line[name_end] == '{') out.emplace(line.substr(0, line.find('}', name_end) + 1), v);
  }
  return out;
}

std::optional<api::Progress> progress_from_metrics(const std::map<std::string, double>& s, int world_size,
                                                   const std::string& now_rfc3339) {
  auto step = sample(s, metrics::name::kWorkerGlobalStep);
  auto epoch = sample(s, metrics::name::kWorkerEpoch);
  if (!step && !epoch) return std::nullopt;
  api::Progress p;
  // The epoch under way, 1-based, as torus run's console counts it (the metric is epochs done, fractional); the last
  // one once all are done.
  p.epoch = static_cast<int32_t>(std::floor(epoch.value_or(0))) + 1;
  if (auto planned = sample(s, metrics::name::kWorkerPlannedEpochs); planned && *planned >= 1)
    p.epoch = std::min(p.epoch, static_cast<int32_t>(*planned));
  p.step = static_cast<int64_t>(step.value_or(0));
  p.loss = sample(s, metrics::name::kWorkerLoss).value_or(0);
  p.accuracy = sample(s, metrics::name::kWorkerValidationAccuracy).value_or(0);
  p.images_per_second =
      metrics::gang_images_per_second(sample(s, metrics::name::kWorkerImagesPerSecond).value_or(0), world_size);
  p.bus_bandwidth_gbps = sample(s, metrics::name::kWorkerAllreduceBusBandwidthBytesPerSecond).value_or(0) / 1e9;
  p.allreduce_algorithm = busiest_algorithm(s);
  auto planned = sample(s, metrics::name::kWorkerPlannedSteps);
  auto global_batch = sample(s, metrics::name::kWorkerGlobalBatchSize);
  if (planned && global_batch) {
    const double per_step = metrics::seconds_per_step(static_cast<int64_t>(*global_batch), p.images_per_second);
    if (auto eta = metrics::eta_seconds(p.step, static_cast<int64_t>(*planned), per_step))
      p.eta_seconds = static_cast<int64_t>(std::ceil(*eta));
  }
  p.update_time = now_rfc3339;
  return p;
}

std::optional<api::CheckpointRef> checkpoint_from_metrics(const std::map<std::string, double>& s,
                                                          const std::string& checkpoint_dir, const std::string& run) {
  auto step = sample(s, metrics::name::kWorkerLastCheckpointStep);
  if (!step || *step <= 0) return std::nullopt;
  api::CheckpointRef ref;
  ref.step = static_cast<int64_t>(*step);
  ref.epoch = static_cast<int32_t>(sample(s, metrics::name::kWorkerLastCheckpointEpoch).value_or(0));
  ref.path = launch::checkpoint_path(checkpoint_dir, run, ref.step);
  const double written = sample(s, metrics::name::kWorkerLastCheckpointTimestampSeconds).value_or(0);
  ref.time =
      format_time(TimePoint(std::chrono::duration_cast<TimePoint::duration>(std::chrono::duration<double>(written))));
  return ref;
}

std::optional<int64_t> resumed_step_from_metrics(const std::map<std::string, double>& s, int attempt) {
  const std::string family = std::string(metrics::name::kWorkerResumedStep) + "{";
  for (auto it = s.lower_bound(family); it != s.end() && it->first.starts_with(family); ++it) {
    if (label_of(it->first, "attempt") != std::to_string(attempt) || !(it->second >= 0)) continue;
    return static_cast<int64_t>(it->second);
  }
  return std::nullopt;
}

std::optional<api::ResumePoint> resumed_from_metrics(const std::map<std::string, double>& s, int attempt,
                                                     const std::string& checkpoint_dir) {
  const auto step = resumed_step_from_metrics(s, attempt);
  if (!step) return std::nullopt;
  api::ResumePoint point;
  point.attempt = attempt;
  point.step = *step;
  const std::string family = std::string(metrics::name::kWorkerResumedFromInfo) + "{";
  for (auto it = s.lower_bound(family); it != s.end() && it->first.starts_with(family); ++it) {
    if (label_of(it->first, "attempt") != std::to_string(attempt)) continue;
    point.run = label_of(it->first, "run");
    point.reason = label_of(it->first, "reason");
  }
  if (point.step > 0) point.path = launch::checkpoint_path(checkpoint_dir, point.run, point.step);
  return point;
}

std::optional<std::string> resume_event_message(const api::ResumePoint& point) {
  const std::string attempt = "attempt " + std::to_string(point.attempt);
  if (point.step > 0) {
    const std::string head = attempt + " resumed from step " + std::to_string(point.step) + " (" + point.path + ")";
    if (point.reason == launch::to_string(launch::ResumeReason::kResumeFrom))
      return head + ": run " + point.run + "'s checkpoint, as spec.training.checkpoint.resumeFrom asks";
    return head + ": this job's own checkpoint";
  }
  if (point.attempt > 0) return attempt + " started at step 0: no checkpoint had been written";
  return std::nullopt;
}

}  // namespace torus::controller
