#include "worker/optim/sgd.h"

namespace torus::worker::optim {

Sgd::Sgd(Backend& backend, const Arena& params, const SgdConfig& config)
    : backend_(backend),
      config_(config),
      momentum_(params.mirror([&backend](size_t bytes) { return backend.allocate(bytes); })) {}

bool Sgd::decays(ParamKind kind) const { return config_.decay_scope == DecayScope::kAll || takes_weight_decay(kind); }

void Sgd::step(const Arena& params, const Arena& grads, float lr, Tensor lr_value) {
  for (size_t i = 0; i < params.size(); ++i) {
    const SgdHyper h{lr, config_.momentum, decays(params.entry(i).kind) ? config_.weight_decay : 0.0f,
                     config_.nesterov, lr_value};
    backend_.sgd_update(params.view(i), grads.view(i), momentum_.view(i), h);
  }
}

}  // namespace torus::worker::optim
