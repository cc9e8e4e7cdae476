#pragma once
// Training or evaluation: what the layers (batch statistics or running ones) and the data loader (shuffled,
// augmented shards or the whole set in order, one centered view per image) do in a pass.
#include <cstdint>

namespace torus::worker {

enum class Mode : uint8_t { kTrain, kEval };

}  // namespace torus::worker
