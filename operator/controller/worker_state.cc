#include "operator/controller/worker_state.h"

#include "operator/controller/labels.h"
#include "operator/controller/planner.h"
#include "operator/controller/time_util.h"

namespace torus::controller {

// Of a worker's termination message, what its failure's description quotes (the first line, at most).
constexpr size_t kTerminationMessageChars = 400;

WorkerState worker_state(const json& pod) {
  WorkerState w;
  w.name = pod["metadata"].value("name", "");
  const json& status = member(pod, "status");
  std::string phase = status.value("phase", "Pending");
  if (phase == "Running") w.phase = PodPhase::kRunning;
  if (phase == "Succeeded") w.phase = PodPhase::kSucceeded;
  if (phase == "Failed") w.phase = PodPhase::kFailed;
  for (const auto& cs : member(status, "containerStatuses")) {
    if (cs.value("name", "") != kWorkerContainer) continue;
    const json& term = member(member(cs, "state"), "terminated");
    if (term.contains("exitCode")) {
      w.exit_code = term["exitCode"].get<int>();
      w.finished_at = parse_time(term.value("finishedAt", ""));
      w.detail = term.value("reason", "");
      // The worker's own words (/dev/termination-log): a collective timeout names the ranks that never arrived and
      // the pods and nodes they run on, so the restart's event and condition say so.
      if (std::string m = term.value("message", ""); !m.empty()) {
        const LastWords words = parse_last_words(m, kTerminationMessageChars);
        if (!words.reason.empty()) w.detail += (w.detail.empty() ? "" : ": ") + words.reason;
        w.last_step = words.step;
        w.finished = words.finished;
      }
    }
  }
  w.disruption = disruption_of(pod);
  if (w.phase == PodPhase::kFailed && !w.exit_code) {
    // Evicted or lost with no container exit: the platform's doing, like a kill.
    w.exit_code = 137;
    w.detail = status.value("reason", "pod failed without a container exit code");
  }
  if (w.phase == PodPhase::kPending) {
    for (const auto& cs : member(status, "containerStatuses")) {
      const json& waiting = member(member(cs, "state"), "waiting");
      if (cs.value("name", "") == kWorkerContainer && waiting.contains("reason"))
        w.waiting = ContainerWaiting{waiting.value("reason", ""), waiting.value("message", "")};
    }
    for (const auto& c : member(status, "conditions")) {
      if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
        w.detail = c.value("reason", "Unschedulable");
        if (std::string m = c.value("message", ""); !m.empty()) w.detail += ": " + m;
      }
    }
    // Another scheduler's pod that nothing has looked at: on a cluster without that scheduler it stays so, with no
    // condition to tell; name the scheduler it waits for.
    const json& spec = member(pod, "spec");
    const std::string scheduler = spec.value("schedulerName", "default-scheduler");
    if (w.detail.empty() && spec.value("nodeName", "").empty() && scheduler != "default-scheduler") {
      w.detail = "waiting for scheduler \"" + scheduler + "\"";
    }
  }
  return w;
}

std::optional<Disruption> disruption_of(const json& pod) {
  for (const auto& c : member(member(pod, "status"), "conditions")) {
    if (c.value("type", "") != "DisruptionTarget" || c.value("status", "") != "True") continue;
    return Disruption{c.value("reason", ""), c.value("message", ""), member(pod, "spec").value("nodeName", ""),
                      parse_time(c.value("lastTransitionTime", ""))};
  }
  return std::nullopt;
}

std::optional<api::Progress> final_progress(const GangObservation& gang, const api::Progress& last,
                                            const std::string& now) {
  for (const WorkerState& w : gang.workers) {
    if (!w.finished || w.finished->rank != 0) continue;
    const process::FinishedEvent& f = *w.finished;
    api::Progress p = last;
    p.step = std::max(p.step, f.steps);
    p.epoch = std::max(p.epoch, f.epochs);  // this attempt's epochs: a resumed run's last reading may say more
    if (f.accuracy) p.accuracy = *f.accuracy;
    if (f.images_per_s > 0) p.images_per_second = f.images_per_s;
    if (f.busbw_gbps > 0) p.bus_bandwidth_gbps = f.busbw_gbps;
    if (f.allreduce_algorithm) p.allreduce_algorithm = *f.allreduce_algorithm;
    p.eta_seconds = 0;
    p.update_time = now;
    return p;
  }
  return std::nullopt;
}

}  // namespace torus::controller
