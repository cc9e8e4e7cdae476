#include "worker/optim/sgd.h"

namespace torus::worker::optim {

Sgd::Sgd(Backend& backend, const Arena& params, const SgdConfig& config)
    : backend_(backend),
      config_(config),
      momentum_(params.mirror([&backend](size_t bytes) { return backend.allocate(bytes); })) {
  for (const ArenaEntry& e : params.entries()) {
    segments_.push_back({static_cast<int64_t>(e.offset), static_cast<int64_t>(e.elements),
                         decays(e.kind) ? config_.weight_decay : 0.0f});
  }
}

bool Sgd::decays(ParamKind kind) const { return config_.decay_scope == DecayScope::kAll || takes_weight_decay(kind); }

void Sgd::step(const Arena& params, const Arena& grads, float lr, Tensor lr_value) {
  const SgdHyper h{lr, config_.momentum, 0.0f, config_.nesterov, lr_value};  // weight decay: per segment
  backend_.sgd_update_segments(params.all(), grads.all(), momentum_.all(), segments_, h);
}

}  // namespace torus::worker::optim
