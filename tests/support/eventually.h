#pragma once
// Waiting for a condition that another thread or process owns and that offers no notification (a cache filled by a
// watch, a lease, a status written by the operator): poll it until it holds or a deadline passes.
#include <chrono>
#include <functional>
#include <thread>

namespace torus::test {

// Polls `done` every `poll` until it holds or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace torus::test
