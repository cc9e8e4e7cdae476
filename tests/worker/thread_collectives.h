#pragma once
// Ranks as threads of one test process: Collectives whose all-reduce is a sum over a shared rendezvous.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "common/util/error.h"
#include "worker/train/sync.h"

namespace torus::worker::train::testing {

// A sum across threads: every rank deposits, the last one publishes the total for that round.
class Rendezvous {
 public:
  explicit Rendezvous(int world) : world_(world) {}
  std::vector<double> sum(const std::vector<double>& mine) {
    std::unique_lock lock(mu_);
    const int64_t round = round_;
    std::vector<double>& acc = pending_[round];
    if (acc.empty()) acc.assign(mine.size(), 0.0);
    for (size_t i = 0; i < mine.size(); ++i) acc[i] += mine[i];
    if (++arrived_ == world_) {
      results_[round] = std::move(acc);
      pending_.erase(round);
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(120), [&] { return round_ > round; })) {
      throw Timeout("rendezvous: the other rank never arrived");
    }
    return results_.at(round);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int world_;
  int arrived_ = 0;
  int64_t round_ = 0;
  std::map<int64_t, std::vector<double>> pending_, results_;
};

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(Rendezvous& r, int rank, int world) : r_(r), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce_sum(std::span<double> v) override {
    auto total = r_.sum(std::vector<double>(v.begin(), v.end()));
    std::copy(total.begin(), total.end(), v.begin());
  }
  void all_reduce_sum(std::span<float> v) override {
    auto total = r_.sum(std::vector<double>(v.begin(), v.end()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(total[i]);
  }
  void broadcast(std::span<float> v, int root) override {
    std::vector<double> mine(v.size(), 0.0);
    if (rank_ == root) mine.assign(v.begin(), v.end());
    auto total = r_.sum(mine);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(total[i]);
  }
  void barrier() override { r_.sum({}); }

 private:
  Rendezvous& r_;
  int rank_, world_;
};

}  // namespace torus::worker::train::testing
