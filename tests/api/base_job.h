#pragma once
// The job the validation and defaults tests start from: 2 workers of 2 processes, ResNet-9 on synthetic data, 4
// epochs of global batch 256, one-cycle to 0.2. Each test merges its change into a copy.
#include <nlohmann/json.hpp>

namespace torus::api::testing {

inline const nlohmann::json kBase = nlohmann::json::parse(R"({
  "apiVersion": "torus.dev/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "base"},
  "spec": {
    "gang": {"workers": 2, "processesPerWorker": 2},
    "model": {"arch": "resnet9"},
    "data": {"dataset": "synthetic"},
    "training": {"epochs": 4, "batchSize": 256, "lrSchedule": {"peak": 0.2}}
  }
})");

}  // namespace torus::api::testing
