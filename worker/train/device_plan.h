#pragma once
// How the training loop feeds and runs steps on a backend: where batches are augmented, how they reach backend
// memory, and whether a step is captured and replayed. One pure function of what the backend offers and of the job,
// so the trainer (which acts on it), its log lines (which show it) and the tests agree.
//
// On a device backend (CUDA):
// - staging: batch k+1 is copied into a pinned slot and uploaded on a copy stream while step k computes.
// - augmentation on the device: the loader hands out the stored u8 pixels (4x fewer bytes to upload than fp32) and
//   one kernel translates (cropPadding), flips and normalizes them into the activations' dtype. Same semantics as the
//   host loader's (a uniform shift in [-pad, pad] per axis, padding with pixel 0, a flip with probability 1/2, the
//   same mean/std); the random draws differ: the device draws from (seed, epoch, rank, position in the epoch).
//   Needs an in-memory set trained at its native size (no resize on the device) and no random-resized crop.
// - a captured step (CUDA Graph): forward, loss, backward and update recorded once, replayed with one launch.
//   Capturable when the step's shapes and buffers stay put: within an epoch of one phase (a phase fixes batch and
//   image size; the evaluation between epochs may regrow the layers' scratch), so each epoch runs its first step
//   eagerly (plans, buffers) and captures its second. The learning rate reaches the replays through backend memory
//   (SgdHyper::lr_value), so a schedule still works. With a gradient sync only when the sync's collectives can be
//   recorded into the graph (GradientSync::capturable: NCCL's, when enabled), watched after each replay; otherwise
//   (host collectives) the step runs eagerly.
#include <cstdint>
#include <string>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/data/dataset.h"
#include "worker/train/config.h"

namespace torus::worker::train {

enum class Staging : uint8_t { kCopy, kPinned };  // kCopy: Backend::upload of the loader's batch, per step
enum class AugmentAt : uint8_t { kHost, kDevice };
enum class StepRun : uint8_t { kEager, kCaptured };
// The step's gradient averaging: none (one rank), one a captured step cannot hold, or one it can.
enum class SyncCapture : uint8_t { kNoSync, kNotCapturable, kCapturable };

struct DevicePlan {
  Staging staging = Staging::kCopy;
  AugmentAt augment = AugmentAt::kHost;
  StepRun step = StepRun::kEager;
  // Why each choice was made (shown in the log lines).
  std::string staging_why, augment_why, step_why;
};

DevicePlan device_plan(MemorySpace memory, const TrainingOffers& offers, const TrainConfig& config,
                       const data::Dataset& train, SyncCapture sync);

// The log lines: "input: ...", "step: ...".
std::vector<std::string> describe(const DevicePlan& plan);

// The device augmentation of an epoch: the transform's padding, flip and normalization; the seed mixes the run's seed,
// the epoch and the rank (sample i of a batch draws from (seed, first sample + i), its position in the epoch).
AugmentSpec augment_spec(const data::Transform& t, uint64_t seed, int64_t epoch, int rank);

}  // namespace torus::worker::train
