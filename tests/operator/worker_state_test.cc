// What the planner reads from one worker pod (operator/controller/worker_state.h).
#include "operator/controller/worker_state.h"

#include <gtest/gtest.h>

#include "tests/operator/planner_fixtures.h"

namespace torus::controller {
namespace {

using namespace torus::controller::testing;

TEST(WorkerState, CarriesTheDisruptionAndTheExitTime) {
  const WorkerState w = worker_state(PodBuilder("mnist", 1)
                                         .running("node-4")
                                         .disrupted(8, "PreemptionByScheduler", "preempted")
                                         .exited(143)
                                         .finished_at(9)
                                         .build());
  ASSERT_TRUE(w.disruption);
  EXPECT_EQ(w.disruption->reason, "PreemptionByScheduler");
  EXPECT_EQ(w.disruption->message, "preempted");
  EXPECT_EQ(w.disruption->node, "node-4");
  EXPECT_EQ(w.disruption->since, at(8));
  EXPECT_EQ(w.finished_at, at(9));
  json not_true = PodBuilder("mnist", 1).running().disrupted(8).build();
  not_true["status"]["conditions"][1]["status"] = "False";
  EXPECT_FALSE(worker_state(not_true).disruption);
  EXPECT_FALSE(disruption_of(PodBuilder("mnist", 1).running().build()));
}

// A job shorter than the operator's progress interval: its Succeeded status still says where it ended, from rank 0's
// result in its termination message (the worker's `finished` event), over the operator's last reading.
TEST(WorkerState, ASucceededGangsProgressIsRankZerosResult) {
  process::FinishedEvent result{.rank = 0, .steps = 234, .epochs = 1, .images_per_s = 3600, .busbw_gbps = 0.2};
  result.accuracy = 0.881;
  result.allreduce_algorithm = "shm";
  json rank0 = PodBuilder("mnist", 0).running().exited(0, "Completed").build();
  rank0["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = process::format_event(result) + "\n";
  const json rank1 = PodBuilder("mnist", 1).running().exited(0, "Completed").build();
  const WorkerState w = worker_state(rank0);
  ASSERT_TRUE(w.finished);
  EXPECT_EQ(w.detail, "Completed");  // a result is no reason
  GangObservation gang;
  gang.expected_workers = 2;
  gang.workers = {w, worker_state(rank1)};
  const api::Progress last{.epoch = 1, .step = 191, .loss = 0.76, .accuracy = 0, .images_per_second = 3624};
  const auto p = final_progress(gang, last, "2026-11-29T08:00:00Z");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->step, 234);
  EXPECT_EQ(p->epoch, 1);
  EXPECT_DOUBLE_EQ(p->accuracy, 0.881);
  EXPECT_DOUBLE_EQ(p->loss, 0.76);  // the last reading's: the result has no loss
  EXPECT_DOUBLE_EQ(p->images_per_second, 3600);
  EXPECT_EQ(p->allreduce_algorithm, "shm");
  EXPECT_EQ(p->eta_seconds, 0);
  gang.workers = {worker_state(rank1)};
  EXPECT_FALSE(final_progress(gang, last, "2026-11-29T08:00:00Z"));
}

TEST(WorkerState, ReadsExitCodeAndReason) {
  WorkerState w = worker_state(PodBuilder("j", 0).exited(137, "OOMKilled").build());
  EXPECT_EQ(w.phase, PodPhase::kFailed);
  EXPECT_EQ(w.exit_code, 137);
  EXPECT_EQ(w.detail, "OOMKilled");
}

// A pending worker of another scheduler that nothing scheduled (no node, no PodScheduled condition: a cluster
// without that scheduler) names the scheduler it waits for; the default scheduler's says nothing of the kind.
TEST(WorkerState, NamesTheSchedulerAnUnscheduledWorkerWaitsFor) {
  json pod = PodBuilder("j", 0).build();
  pod["spec"]["schedulerName"] = "volcano";
  pod["spec"].erase("nodeName");
  pod["status"] = {{"phase", "Pending"}};
  EXPECT_EQ(worker_state(pod).detail, "waiting for scheduler \"volcano\"");
  pod["spec"]["schedulerName"] = "default-scheduler";
  EXPECT_EQ(worker_state(pod).detail, "");
}

// A worker's termination message (the worker writes its reason to /dev/termination-log) is quoted: a collective
// timeout's names the rank, pod and node that never arrived (issue 31.3).
TEST(WorkerState, QuotesTheTerminationMessage) {
  json pod = PodBuilder("j", 0).exited(43, "Error").build();
  pod["status"]["containerStatuses"][0]["state"]["terminated"]["message"] =
      "CollectiveTimeout: collective all_reduce #3 on rank 0 did not finish within 2000 ms; ranks that never arrived: "
      "1 (pod j-worker-1, node n2)\nsecond line";
  const WorkerState w = worker_state(pod);
  EXPECT_EQ(w.detail,
            "Error: CollectiveTimeout: collective all_reduce #3 on rank 0 did not finish within 2000 ms; ranks that "
            "never arrived: 1 (pod j-worker-1, node n2)");
}

}  // namespace
}  // namespace torus::controller
