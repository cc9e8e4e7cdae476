#include "worker/train/device_plan.h"

#include <algorithm>

#include "common/util/error.h"
#include "worker/data/sampler.h"

namespace torus::worker::train {
namespace {

// Empty when the device can augment this job's training batches, else why not.
std::string why_not_on_device(const TrainingOffers& offers, const TrainConfig& config, const data::Dataset& train) {
  if (!offers.augment) return "the backend does not augment";
  if (dynamic_cast<const data::ArrayDataset*>(&train) == nullptr)
    return train.describe() + " is decoded from files (the loader decodes and resizes)";
  if (config.data.transform.train_crop == data::TrainCrop::kRandomResizedCrop)
    return "randomResizedCrop resamples (the device only translates and flips)";
  if (train.channels() > AugmentSpec::kMaxChannels)
    return std::to_string(train.channels()) + " channels (the device kernel takes at most " +
           std::to_string(AugmentSpec::kMaxChannels) + ")";
  const data::ImageSize native = train.native_size(0);
  for (const api::ResolvedPhase& p : config.phases) {
    if (p.image_size != native.h || p.image_size != native.w)
      return "a phase trains at " + std::to_string(p.image_size) + " px, not the set's native " +
             std::to_string(native.h) + "x" + std::to_string(native.w) + " (the loader resizes)";
  }
  return "";
}

const char* transform_name(const data::Transform& t) {
  const bool pad = t.train_crop == data::TrainCrop::kPadCrop && t.pad > 0;
  const bool flip = t.flip == data::Flip::kHorizontal;
  if (pad && flip) return "cropPadding and flip, ";
  if (pad) return "cropPadding, ";
  if (flip) return "flip, ";
  return "";
}

}  // namespace

DevicePlan device_plan(MemorySpace memory, const TrainingOffers& offers, const TrainConfig& config,
                       const data::Dataset& train, SyncCapture sync) {
  DevicePlan plan;
  if (memory == MemorySpace::kHost) {
    plan.staging_why = plan.augment_why = plan.step_why = "backend memory is host memory";
    return plan;
  }
  if (!offers.staging) {
    plan.staging_why = plan.augment_why = "the backend offers no batch staging";
  } else {
    plan.staging = Staging::kPinned;
    plan.staging_why = "batch k+1 uploads while step k runs";
    const std::string why_not = why_not_on_device(offers, config, train);
    plan.augment = why_not.empty() ? AugmentAt::kDevice : AugmentAt::kHost;
    plan.augment_why =
        why_not.empty() ? std::string(transform_name(config.data.transform)) + "u8 pixels uploaded" : why_not;
  }
  if (!offers.capture) {
    plan.step_why = "the backend does not capture steps";
  } else if (sync == SyncCapture::kNotCapturable) {
    plan.step_why = "gradients are averaged across ranks by collectives a graph cannot hold";
  } else {
    plan.step = StepRun::kCaptured;
    plan.step_why = "per epoch, after one eager step; the learning rate is read from device memory";
    if (sync == SyncCapture::kCapturable)
      plan.step_why += "; the gradient all-reduce inside, watched after each replay";
  }
  return plan;
}

std::vector<std::string> describe(const DevicePlan& plan) {
  const std::string staging = plan.staging == Staging::kPinned ? "pinned staging" : "plain uploads";
  const std::string augment = plan.augment == AugmentAt::kDevice ? "augmented on the device" : "augmented on the host";
  const std::string step = plan.step == StepRun::kCaptured ? "captured and replayed" : "eager";
  return {"input: " + staging + " (" + plan.staging_why + "), " + augment + " (" + plan.augment_why + ")",
          "step: " + step + " (" + plan.step_why + ")"};
}

AugmentSpec augment_spec(const data::Transform& t, uint64_t seed, int64_t epoch, int rank) {
  AugmentSpec spec;
  if (t.mean.size() > static_cast<size_t>(AugmentSpec::kMaxChannels) || t.mean.size() != t.std.size())
    throw InvalidArgument("augmentation: mean and std need one value per channel (at most 4)");
  for (size_t c = 0; c < t.mean.size(); ++c) {
    spec.mean[c] = t.mean[c];
    spec.inv_std[c] = 1.0f / t.std[c];
  }
  spec.max_shift = t.train_crop == data::TrainCrop::kPadCrop ? t.pad : 0;
  spec.flip = t.flip == data::Flip::kHorizontal;
  spec.seed = data::mix_seed(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank), 0xA06);
  return spec;
}

}  // namespace torus::worker::train
