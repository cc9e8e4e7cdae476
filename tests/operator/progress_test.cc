// Progress from a worker's Prometheus text into TrainingJob status.
#include "operator/controller/progress.h"

#include <gtest/gtest.h>

namespace torus::controller {
namespace {

const char* kExposition = R"(# HELP torus_worker_global_step Global step.
# TYPE torus_worker_global_step gauge
torus_worker_global_step{job="j",namespace="n",rank="0",attempt="1"} 250
torus_worker_planned_steps{job="j",namespace="n",rank="0",attempt="1"} 1000
torus_worker_epoch{job="j",namespace="n",rank="0",attempt="1"} 1.25
torus_worker_loss{job="j",namespace="n",rank="0",attempt="1"} 0.5
torus_worker_validation_accuracy{job="j",namespace="n",rank="0",attempt="1"} 0.91
torus_worker_images_per_second{job="j",namespace="n",rank="0",attempt="1"} 1000
torus_worker_global_batch_size{job="j",namespace="n",rank="0",attempt="1"} 256
torus_worker_step_seconds_bucket{le="0.1"} 3
torus_worker_allreduce_bus_bandwidth_bytes_per_second{algorithm="ring",level="global"} 2.5e9
torus_worker_allreduce_bytes_total{job="j",algorithm="ring",level="global"} 4096
torus_worker_allreduce_bytes_total{job="j",algorithm="hierarchical",level="global"} 1.5e6
torus_worker_allreduce_bytes_total{job="j",algorithm="ring",level="intra_host"} 9e9
)";

TEST(Progress, ParsesExposition) {
  auto s = parse_prometheus_text(kExposition);
  EXPECT_DOUBLE_EQ(s.at("torus_worker_global_step"), 250);
  EXPECT_DOUBLE_EQ(s.at("torus_worker_allreduce_bus_bandwidth_bytes_per_second"), 2.5e9);
  EXPECT_DOUBLE_EQ(s.at(R"(torus_worker_allreduce_bytes_total{job="j",algorithm="hierarchical",level="global"})"), 1.5e6);
  EXPECT_EQ(s.count("# HELP"), 0u);
}

TEST(Progress, StatusFieldsAndEta) {
  auto p = progress_from_metrics(parse_prometheus_text(kExposition), 2, "2026-11-22T06:00:00Z");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->epoch, 2) << "1.25 epochs done: the second is under way (1-based, as the console counts)";
  EXPECT_EQ(p->step, 250);
  EXPECT_DOUBLE_EQ(p->loss, 0.5);
  EXPECT_DOUBLE_EQ(p->accuracy, 0.91);
  EXPECT_DOUBLE_EQ(p->images_per_second, 2000);
  // 750 steps left x 256 images / 2000 images/s = 96 s.
  EXPECT_EQ(p->eta_seconds, 96);
  EXPECT_DOUBLE_EQ(p->bus_bandwidth_gbps, 2.5);
  // The gang-wide series with the most bytes; a level inside the hierarchy does not count.
  EXPECT_EQ(p->allreduce_algorithm, "hierarchical");
}

TEST(Progress, TheEpochIsTheOneUnderWayAndTheLastOnceAllAreDone) {
  EXPECT_EQ(progress_from_metrics(parse_prometheus_text("torus_worker_epoch 0\n"), 1, "")->epoch, 1);
  const auto done = parse_prometheus_text("torus_worker_epoch 4\ntorus_worker_planned_epochs 4\n");
  EXPECT_EQ(progress_from_metrics(done, 1, "")->epoch, 4);
}

TEST(Progress, NoAllReduceYetNamesNoAlgorithm) {
  auto p = progress_from_metrics(parse_prometheus_text("torus_worker_global_step 3\n"), 1, "");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->allreduce_algorithm, "");
}

TEST(Progress, NoWorkerMetricsNoProgress) {
  EXPECT_FALSE(progress_from_metrics(parse_prometheus_text("up 1\n"), 1, ""));
}

TEST(Progress, TheLastCheckpointAndTheResumedStepOfTheJobsAttempt) {
  const auto s = parse_prometheus_text(R"(torus_worker_last_checkpoint_step{job="j",attempt="1"} 120
torus_worker_last_checkpoint_epoch{job="j",attempt="1"} 3
torus_worker_last_checkpoint_timestamp_seconds{job="j",attempt="1"} 1.8e9
torus_worker_resumed_step{job="j",attempt="1"} 80
torus_worker_resumed_from_info{job="j",attempt="1",run="uid-1",reason="ThisRun"} 1
)");
  const auto ref = checkpoint_from_metrics(s, "/ckpt/", "uid-1");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->step, 120);
  EXPECT_EQ(ref->epoch, 3);
  EXPECT_EQ(ref->path, "/ckpt/uid-1/ckpt-120.torus") << "the job's run's own folder";
  EXPECT_EQ(ref->time, "2027-01-15T08:00:00Z");
  EXPECT_EQ(resumed_step_from_metrics(s, 1), 80);
  EXPECT_EQ(resumed_step_from_metrics(s, 2), std::nullopt) << "another attempt's rank 0";
  const auto before = parse_prometheus_text(
      "torus_worker_resumed_step{attempt=\"0\"} -1\n"
      "torus_worker_last_checkpoint_step{attempt=\"0\"} 0\n");
  EXPECT_EQ(resumed_step_from_metrics(before, 0), std::nullopt) << "not looked for its checkpoint yet";
  EXPECT_EQ(checkpoint_from_metrics(before, "/ckpt", "uid-1"), std::nullopt) << "none written yet";
  const auto resumed = resumed_from_metrics(s, 1, "/ckpt");
  ASSERT_TRUE(resumed);
  EXPECT_EQ(*resumed, (api::ResumePoint{1, 80, "/ckpt/uid-1/ckpt-80.torus", "uid-1", "ThisRun", ""}));
  EXPECT_EQ(resumed_from_metrics(s, 2, "/ckpt"), std::nullopt);
}

TEST(Progress, TheResumeEventSaysWhoseCheckpointAndWhy) {
  EXPECT_EQ(resume_event_message({1, 80, "/ckpt/u/ckpt-80.torus", "u", "ThisRun", ""}),
            "attempt 1 resumed from step 80 (/ckpt/u/ckpt-80.torus): this job's own checkpoint");
  EXPECT_EQ(resume_event_message({0, 234, "/ckpt/old/ckpt-234.torus", "old", "ResumeFrom", ""}),
            "attempt 0 resumed from step 234 (/ckpt/old/ckpt-234.torus): run old's checkpoint, as "
            "spec.training.checkpoint.resumeFrom asks");
  EXPECT_EQ(resume_event_message({2, 0, "", "", "Fresh", ""}),
            "attempt 2 started at step 0: no checkpoint had been written");
  EXPECT_EQ(resume_event_message({0, 0, "", "", "Fresh", ""}), std::nullopt) << "a new job starting fresh: no event";
}

}  // namespace
}  // namespace torus::controller
