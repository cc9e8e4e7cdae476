#pragma once
// The job whose metrics the metrics tests expose: 2 ranks of Fashion-MNIST, 1000 steps in 4 epochs at a per-rank
// batch of 128 (global 256) on 28x28 images, aiming at 92% top-1.
#include <utility>

#include "common/metrics/worker_metrics.h"

namespace torus::metrics::testing {

// The gauges a rank sets once, from its plan.
inline void set_sample_plan(WorkerMetrics& m) {
  const std::pair<Gauge*, double> plan[] = {
      {&m.world_size, 2},   {&m.planned_steps, 1000},    {&m.planned_epochs, 4}, {&m.target_accuracy, 0.92},
      {&m.batch_size, 128}, {&m.global_batch_size, 256}, {&m.image_size, 28}};
  for (const auto& [gauge, value] : plan) gauge->set(value);
}

}  // namespace torus::metrics::testing
