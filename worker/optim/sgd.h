#pragma once
// SGD with momentum / Nesterov; weight decay only on conv and linear weights (never BN or biases).
#include <vector>

#include "worker/backend/backend.h"
#include "worker/tensor/arena.h"

namespace torus::worker::optim {

// Which parameters weight decay applies to.
enum class DecayScope : uint8_t { kWeightsOnly, kAll };

struct SgdConfig {
  float momentum = 0.9f;
  math::Nesterov nesterov = math::Nesterov::kOn;
  float weight_decay = 5e-4f;
  DecayScope decay_scope = DecayScope::kWeightsOnly;  // conv and linear weights, never BN or biases
};

class Sgd {
 public:
  // Momentum buffers mirror the parameter arena (same entries and native layouts), starting at zero.
  Sgd(Backend& backend, const Arena& params, const SgdConfig& config);
  // `lr_value` (1 fp32 in backend memory), when not empty, is read by the update when it runs instead of `lr`.
  // One Backend::sgd_update_segments call over the whole arenas (`grads` mirrors `params`).
  void step(const Arena& params, const Arena& grads, float lr, Tensor lr_value = {});
  Arena& momentum() { return momentum_; }
  const Arena& momentum() const { return momentum_; }
  const SgdConfig& config() const { return config_; }

 private:
  bool decays(ParamKind kind) const;
  Backend& backend_;
  SgdConfig config_;
  Arena momentum_;
  std::vector<SgdSegment> segments_;  // every parameter with its weight decay
};

}  // namespace torus::worker::optim
