#pragma once
// A small Prometheus metrics registry: counters, gauges and histograms with labels, written out in the text
// exposition format 0.0.4. Hand-written because Debian ships no C++ Prometheus client.
//
// Families are registered once at start-up (registration takes a mutex); a labelled child is looked up once and
// its reference kept by the caller, so the hot path (inc/set/observe) is lock-free atomics only.
//
//   Registry registry;
//   auto& steps = registry.counter("torus_worker_steps_total", "Optimizer steps taken.", {"rank"});
//   Counter& mine = steps.labels({"0"});
//   mine.inc();
//   std::string text = registry.expose();
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torus::metrics {

// Label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

enum class MetricType { kCounter, kGauge, kHistogram };

// Monotonically increasing value; exposed as `<name>` (the name must end in `_total`).
class Counter {
 public:
  // Throws InvalidArgument for a negative or NaN increment: a counter never goes down.
  void inc(double amount = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void dec(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  // Seconds since the Unix epoch, e.g. for "last progress" timestamps.
  void set_to_current_time();
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Distribution over explicit upper bounds (le). Exposed as cumulative `_bucket`, `_sum` and `_count`.
class Histogram {
 public:
  // `upper_bounds` must be finite and strictly increasing; +Inf is implied.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;  // without +Inf
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf last (== count)
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;  // per bucket, not cumulative; last is +Inf
  std::atomic<double> sum_{0.0};
};

// Bounds start, start*factor, ... (count of them). Throws InvalidArgument on bad arguments.
std::vector<double> exponential_buckets(double start, double factor, int count);
// Bounds start, start+width, ... (count of them).
std::vector<double> linear_buckets(double start, double width, int count);

// The children of one metric name, one per distinct set of label values.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends this family's HELP, TYPE and sample lines.
  virtual void expose(std::string& out) const = 0;

 protected:
  // Throws InvalidArgument unless `values` has one entry per label name.
  void check_arity(const LabelValues& values) const;
  void write_header(std::string& out) const;

  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
  mutable std::mutex mutex_;  // guards the children map, never a child's value
};

template <typename T>
class Family : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;
  // Returns the child for these label values, creating it on first use. Keep the reference: it stays valid for
  // the registry's lifetime and updating it takes no lock.
  T& labels(const LabelValues& values);
  void expose(std::string& out) const override;

 private:
  friend class Registry;
  std::vector<double> buckets_;  // histograms only
  std::map<LabelValues, std::unique_ptr<T>> children_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each throws InvalidArgument for an invalid or already registered name, an invalid label name, a counter not
  // named `*_total`, or bad histogram buckets. A family with no label names has its single child created now.
  Family<Counter>& counter(const std::string& name, const std::string& help,
                           const std::vector<std::string>& label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       const std::vector<std::string>& label_names = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names, std::vector<double> upper_bounds);

  // The whole registry in the Prometheus text format 0.0.4, families in registration order.
  std::string expose() const;

 private:
  void check_new_name(const std::string& name) const;

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// The Content-Type of expose()'s output.
inline constexpr const char* kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

// Helpers of the text format, public for tests.
std::string escape_label_value(const std::string& value);
std::string escape_help(const std::string& help);
// Go-compatible float text: shortest round-trip digits, "+Inf", "-Inf", "NaN".
std::string format_value(double value);

}  // namespace torus::metrics
