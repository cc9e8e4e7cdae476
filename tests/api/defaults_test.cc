// Defaults fill what the job leaves unset and nothing else; some depend on the data set and the network.
#include "common/api/defaults.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/api/codec.h"
#include "tests/api/base_job.h"

namespace torus::api {
namespace {

using nlohmann::json;
using testing::kBase;

// A job that names no image runs the worker image of its device: the GPU one is the CPU one's tag with the CUDA
// suffix (scripts/images-gpu.sh builds it; tests/packaging checks the script uses the same suffix).
TEST(Defaults, AJobWithoutAnImageRunsItsDevicesWorkerImage) {
  for (const auto& [device, image] :
       {std::pair{Device::kCpu, std::string("ghcr.io/torus-dev/torus-worker:0.1.0")},
        std::pair{Device::kGpu, std::string("ghcr.io/torus-dev/torus-worker:0.1.0-cuda13")}}) {
    TrainingJob job = decode_json(kBase).job;
    job.spec.gang.image.clear();
    job.spec.gang.device = device;
    apply_defaults(job);
    EXPECT_EQ(job.spec.gang.image, image);
  }
  EXPECT_EQ(default_worker_image(Device::kGpu, "registry.example/torus-worker:2"),
            "registry.example/torus-worker:2-cuda13");
}

TEST(Defaults, FillWhatIsUnsetAndNothingElse) {
  TrainingJob job = decode_json(kBase).job;
  job.spec.training.optimizer.nesterov = true;
  job.spec.training.optimizer.weight_decay = 0.0;  // an explicit 0 stays 0
  apply_defaults(job);
  const TrainingJobSpec& s = job.spec;
  EXPECT_EQ(s.gang.processes_per_worker, 2);
  EXPECT_EQ(s.gang.device, Device::kCpu);
  EXPECT_EQ(s.gang.image, kDefaultWorkerImage);
  EXPECT_EQ(s.model.widths, (std::vector<int32_t>{64, 128, 256, 512}));
  EXPECT_EQ(s.model.stem, Stem::kCifar);
  EXPECT_EQ(s.model.pooling, Pooling::kMax);
  EXPECT_EQ(s.model.input_channels, 3);
  EXPECT_EQ(s.model.num_classes, 10);
  EXPECT_EQ(s.data.image_size, 32);
  EXPECT_EQ(s.data.synthetic.train_images, 10000);
  EXPECT_EQ(s.training.optimizer.nesterov, true);
  EXPECT_EQ(s.training.optimizer.weight_decay, 0.0);
  EXPECT_EQ(s.training.optimizer.momentum, 0.9);
  EXPECT_EQ(s.training.lr_schedule.type, LrScheduleKind::kOneCycle);
  EXPECT_EQ(s.training.lr_schedule.warmup_epochs, 0.0);
  EXPECT_EQ(s.all_reduce.first_bucket_size_mb, 1.0);
  EXPECT_EQ(s.all_reduce.bucket_size_mb, 25.0);
  EXPECT_EQ(s.run_policy.restart_policy, RestartPolicy::kNever);
  EXPECT_EQ(s.run_policy.managed_by, kDefaultManagedBy);
  EXPECT_FALSE(s.run_policy.scheduling_policy.min_available.has_value()) << "no gang scheduler: no PodGroup to size";
  EXPECT_EQ(s.metrics_port, kDefaultMetricsPort);
  EXPECT_EQ(s.rendezvous_port, kDefaultRendezvousPort);
  EXPECT_TRUE(s.training.checkpoint.dir.empty());
  EXPECT_FALSE(s.training.checkpoint.every_epochs.has_value());
  // Idempotent.
  EXPECT_EQ(with_defaults(job), job);
  // With a gang scheduler the operator makes a PodGroup: its minMember defaults to every worker.
  job.spec.run_policy.scheduling_policy.scheduler_name = "volcano";
  EXPECT_EQ(with_defaults(job).spec.run_policy.scheduling_policy.min_available, 2);
}

TEST(Defaults, DependOnTheDataSetAndTheNetwork) {
  json doc = kBase;
  doc["spec"]["data"] = {{"dataset", "imagefolder"}, {"path", "/d"}};
  doc["spec"]["model"]["arch"] = "resnet50";
  doc["spec"]["allReduce"] = {{"algorithm", "torus2d"}};
  doc["spec"]["training"]["checkpoint"] = {{"dir", "/ckpt"}};
  const TrainingJob job = with_defaults(decode_json(doc).job);
  EXPECT_EQ(job.spec.model.stem, Stem::kImageNet);
  EXPECT_EQ(job.spec.model.pooling, Pooling::kAvg);
  EXPECT_FALSE(job.spec.model.num_classes.has_value());  // counted from the folder
  EXPECT_EQ(job.spec.data.image_size, 224);
  EXPECT_EQ(job.spec.all_reduce.grid.x, 2);  // processesPerWorker along x
  EXPECT_EQ(job.spec.all_reduce.grid.y, 2);
  EXPECT_EQ(job.spec.training.checkpoint.every_epochs, 1);
  EXPECT_EQ(job.spec.training.checkpoint.keep, 2);
  json fm = kBase;
  fm["spec"]["data"] = {{"dataset", "fashion-mnist"}};
  const TrainingJob f = with_defaults(decode_json(fm).job);
  EXPECT_EQ(f.spec.data.path, kFashionMnistPath);
  EXPECT_EQ(f.spec.model.input_channels, 1);
  EXPECT_EQ(f.spec.data.image_size, 28);
}

}  // namespace
}  // namespace torus::api
