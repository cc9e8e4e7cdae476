#pragma once
// Ranks as threads: the multi-rank tests' launcher (comm, worker and GPU tests).
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace torus::test {

// Runs fn(rank) on `n` threads and rethrows the first failure once all have ended.
inline void run_ranks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr first;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace torus::test
