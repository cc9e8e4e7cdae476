#pragma once
// The CPU backend: oneDNN primitives (cached per geometry) on fp32 activations in NHWC or, 64 channels and wider,
// nChw8c (staging.h), conv weights kept in the blocked layout oneDNN picks for them, OpenMP threads sized from the
// cgroup CPU quota.
#include <memory>

#include "worker/backend/backend.h"

namespace torus::worker::cpu {

// Threads for the CPU backend: TORUS_NUM_THREADS if set, else the CPUs this process may use (cgroup quota).
int default_threads();

// Which algorithm 3x3 stride-1 convolutions take (impl_choice.h); the default follows TORUS_CPU_WINOGRAD (1).
enum class ConvAlgorithm { kDirect, kWinogradWhereAvailable };
ConvAlgorithm default_conv_algorithm();

// threads <= 0 means default_threads(). OpenMP's thread count is process-wide: the last backend built wins.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);
std::unique_ptr<Backend> make_cpu_backend(int threads, ConvAlgorithm algorithm);

}  // namespace torus::worker::cpu
