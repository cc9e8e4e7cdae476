#include "common/metrics/registry.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <iterator>
#include <utility>

#include "common/util/error.h"

namespace torus::metrics {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_metric_name(const std::string& name) {
  if (name.empty() || !(is_name_start(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!(is_name_start(c) || is_digit(c) || c == ':')) return false;
  }
  return true;
}

// Label names: [a-zA-Z_][a-zA-Z0-9_]*, and the `__` prefix is reserved for Prometheus itself.
bool valid_label_name(const std::string& name) {
  if (name.empty() || !is_name_start(name[0]) || name.rfind("__", 0) == 0) return false;
  for (char c : name) {
    if (!(is_name_start(c) || is_digit(c))) return false;
  }
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_label_names(const std::string& metric, const std::vector<std::string>& names, MetricType type) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (!valid_label_name(names[i])) {
      throw InvalidArgument("metric " + metric + ": label name '" + names[i] +
                            "' must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __");
    }
    if (type == MetricType::kHistogram && names[i] == "le") {
      throw InvalidArgument("metric " + metric + ": label name 'le' is reserved for histogram buckets");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) throw InvalidArgument("metric " + metric + ": label name '" + names[i] + "' repeats");
    }
  }
}

void check_buckets(const std::vector<double>& bounds) {
  if (bounds.empty()) throw InvalidArgument("histogram buckets: need at least one finite upper bound");
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      throw InvalidArgument("histogram buckets: upper bounds must be finite (+Inf is implied), got " +
                            format_value(bounds[i]));
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      throw InvalidArgument("histogram buckets: upper bounds must increase strictly, got " +
                            format_value(bounds[i - 1]) + " then " + format_value(bounds[i]));
    }
  }
}

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `{a="x",b="y"}` plus an optional trailing label (the histogram's `le`); empty when there are no labels.
std::string label_block(const std::vector<std::string>& names, const LabelValues& values,
                        const char* extra_name = nullptr, const std::string& extra_value = {}) {
  if (names.empty() && extra_name == nullptr) return {};
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i] + "=\"" + escape_label_value(values[i]) + '"';
  }
  if (extra_name != nullptr) {
    if (!names.empty()) out += ',';
    out += std::string(extra_name) + "=\"" + escape_label_value(extra_value) + '"';
  }
  out += '}';
  return out;
}

void write_sample(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name;
  out += labels;
  out += ' ';
  out += value;
  out += '\n';
}

template <typename T>
std::unique_ptr<T> make_child(const std::vector<double>& /*buckets*/) {
  return std::make_unique<T>();
}

template <>
std::unique_ptr<Histogram> make_child<Histogram>(const std::vector<double>& buckets) {
  return std::make_unique<Histogram>(buckets);
}

void expose_child(std::string& out, const std::string& name, const std::vector<std::string>& label_names,
                  const LabelValues& values, const Counter& counter) {
  write_sample(out, name, label_block(label_names, values), format_value(counter.value()));
}

void expose_child(std::string& out, const std::string& name, const std::vector<std::string>& label_names,
                  const LabelValues& values, const Gauge& gauge) {
  write_sample(out, name, label_block(label_names, values), format_value(gauge.value()));
}

void expose_child(std::string& out, const std::string& name, const std::vector<std::string>& label_names,
                  const LabelValues& values, const Histogram& histogram) {
  const Histogram::Snapshot snap = histogram.snapshot();
  for (size_t i = 0; i < snap.upper_bounds.size(); ++i) {
    write_sample(out, name + "_bucket", label_block(label_names, values, "le", format_value(snap.upper_bounds[i])),
                 std::to_string(snap.cumulative[i]));
  }
  write_sample(out, name + "_bucket", label_block(label_names, values, "le", "+Inf"), std::to_string(snap.count));
  write_sample(out, name + "_sum", label_block(label_names, values), format_value(snap.sum));
  write_sample(out, name + "_count", label_block(label_names, values), std::to_string(snap.count));
}

}  // namespace

// ---- values ----

void Counter::inc(double amount) {
  if (!(amount >= 0.0)) throw InvalidArgument("counter increment must be >= 0, got " + format_value(amount));
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Gauge::set_to_current_time() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  set(std::chrono::duration<double>(now).count());
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_.size() + 1)) {
  check_buckets(upper_bounds_);
}

void Histogram::observe(double value) {
  // Bucket i holds values in (bound[i-1], bound[i]]; NaN and values above every bound land in +Inf.
  size_t i = 0;
  while (i < upper_bounds_.size() && !(value <= upper_bounds_[i])) ++i;
  bucket_counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  // The count is the sum of the buckets read here, so `_count` always equals the `+Inf` bucket.
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    snap.cumulative[i] = running;
  }
  snap.count = running;
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (!(start > 0.0) || !(factor > 1.0) || count < 1) {
    throw InvalidArgument("exponential_buckets: need start > 0, factor > 1, count >= 1, got start=" +
                          format_value(start) + " factor=" + format_value(factor) + " count=" + std::to_string(count));
  }
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::vector<double> linear_buckets(double start, double width, int count) {
  if (!(width > 0.0) || count < 1) {
    throw InvalidArgument("linear_buckets: need width > 0, count >= 1, got width=" + format_value(width) +
                          " count=" + std::to_string(count));
  }
  std::vector<double> bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + width * i);
  return bounds;
}

// ---- families ----

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}

void FamilyBase::check_arity(const LabelValues& values) const {
  if (values.size() != label_names_.size()) {
    throw InvalidArgument("metric " + name_ + ": expected " + std::to_string(label_names_.size()) +
                          " label values, got " + std::to_string(values.size()));
  }
}

void FamilyBase::write_header(std::string& out) const {
  out += "# HELP " + name_ + ' ' + escape_help(help_) + '\n';
  out += "# TYPE " + name_ + ' ' + type_name(type_) + '\n';
}

template <typename T>
T& Family<T>::labels(const LabelValues& values) {
  check_arity(values);
  std::lock_guard lock(mutex_);
  auto it = children_.find(values);
  if (it == children_.end()) it = children_.emplace(values, make_child<T>(buckets_)).first;
  return *it->second;
}

template <typename T>
void Family<T>::expose(std::string& out) const {
  write_header(out);
  std::lock_guard lock(mutex_);
  for (const auto& [values, child] : children_) expose_child(out, name_, label_names_, values, *child);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- registry ----

void Registry::check_new_name(const std::string& name) const {
  if (!valid_metric_name(name)) throw InvalidArgument("metric name '" + name + "' must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  for (const auto& family : families_) {
    if (family->name() == name) throw InvalidArgument("metric " + name + " is already registered");
  }
}

Family<Counter>& Registry::counter(const std::string& name, const std::string& help,
                                   const std::vector<std::string>& label_names) {
  if (!ends_with(name, "_total")) throw InvalidArgument("counter " + name + ": name must end in _total");
  check_label_names(name, label_names, MetricType::kCounter);
  std::lock_guard lock(mutex_);
  check_new_name(name);
  auto family = std::make_unique<Family<Counter>>(name, help, MetricType::kCounter, label_names);
  if (label_names.empty()) family->labels({});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Gauge>& Registry::gauge(const std::string& name, const std::string& help,
                               const std::vector<std::string>& label_names) {
  check_label_names(name, label_names, MetricType::kGauge);
  std::lock_guard lock(mutex_);
  check_new_name(name);
  auto family = std::make_unique<Family<Gauge>>(name, help, MetricType::kGauge, label_names);
  if (label_names.empty()) family->labels({});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

Family<Histogram>& Registry::histogram(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names, std::vector<double> upper_bounds) {
  check_label_names(name, label_names, MetricType::kHistogram);
  check_buckets(upper_bounds);
  std::lock_guard lock(mutex_);
  check_new_name(name);
  auto family = std::make_unique<Family<Histogram>>(name, help, MetricType::kHistogram, label_names);
  family->buckets_ = std::move(upper_bounds);
  if (label_names.empty()) family->labels({});
  auto& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

std::string Registry::expose() const {
  std::string out;
  std::lock_guard lock(mutex_);
  for (const auto& family : families_) family->expose(out);
  return out;
}

// ---- text format ----

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string escape_help(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto result = std::to_chars(std::begin(buf), std::end(buf), value);
  return std::string(buf, result.ptr);
}

}  // namespace torus::metrics
