#include "common/process/worker_events.h"

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>

namespace torus::process {
namespace {

using json = nlohmann::json;

// Writes every field of a struct into a JSON object.
class Writer {
 public:
  template <class T>
  void operator()(const std::string& key, const T& value) {
    out[key] = encode(value);
  }
  template <class T>
  void operator()(const std::string& key, const std::optional<T>& value) {
    if (value) out[key] = encode(*value);
  }
  json out = json::object();

 private:
  template <class T>
  static json encode(const T& value) {
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      return value;
    } else {
      Writer nested;
      fields(nested, value);
      return nested.out;
    }
  }
};

// Reads every field of a struct from a JSON object; the first field that is missing or of another type stops it,
// named ("progress.ledger.steps: missing").
class Reader {
 public:
  Reader(const json& in, std::string where) : in_(in), where_(std::move(where)) {}
  template <class T>
  void operator()(const std::string& key, T& value) {
    if (!error.empty()) return;
    const auto it = in_.find(key);
    if (it == in_.end() || it->is_null()) {
      error = where_ + "." + key + ": missing";
      return;
    }
    decode(*it, key, value);
  }
  template <class T>
  void operator()(const std::string& key, std::optional<T>& value) {
    if (!error.empty()) return;
    const auto it = in_.find(key);
    if (it == in_.end() || it->is_null()) return;
    decode(*it, key, value.emplace());
  }
  std::string error;

 private:
  template <class T>
  void decode(const json& j, const std::string& key, T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      if (!j.is_boolean()) return wrong(key, "true or false", j);
      value = j.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!j.is_number_integer()) return wrong(key, "an integer", j);
      value = j.get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!j.is_number()) return wrong(key, "a number", j);
      value = j.get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!j.is_string()) return wrong(key, "a string", j);
      value = j.get<std::string>();
    } else {
      if (!j.is_object()) return wrong(key, "an object", j);
      Reader nested(j, where_ + "." + key);
      fields(nested, value);
      error = nested.error;
    }
  }
  void wrong(const std::string& key, const char* expected, const json& got) {
    error = where_ + "." + key + ": expected " + expected + ", got " + got.dump();
  }
  const json& in_;
  std::string where_;
};

// The alternative of WorkerEvent named `name`, read from `j`.
template <size_t I = 0>
std::optional<WorkerEvent> read_named(std::string_view name, const json& j, std::string& error) {
  if constexpr (I == std::variant_size_v<WorkerEvent>) {
    error = "unknown event \"" + std::string(name) + "\"";
    return std::nullopt;
  } else {
    using E = std::variant_alternative_t<I, WorkerEvent>;
    if (name != E::kName) return read_named<I + 1>(name, j, error);
    E e;
    Reader reader(j, std::string(E::kName));
    fields(reader, e);
    if (!reader.error.empty()) {
      error = reader.error;
      return std::nullopt;
    }
    return WorkerEvent{std::move(e)};
  }
}

}  // namespace

std::string_view event_name(const WorkerEvent& e) {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::kName; }, e);
}

int event_rank(const WorkerEvent& e) {
  return std::visit([](const auto& x) { return x.rank; }, e);
}

std::string format_event(const WorkerEvent& event) {
  Writer writer;
  writer.out["event"] = std::string(event_name(event));
  std::visit([&writer](const auto& x) { fields(writer, x); }, event);
  return std::string(kEventPrefix) + writer.out.dump();
}

std::optional<WorkerEvent> parse_event(std::string_view line, std::string* error) {
  if (line.substr(0, kEventPrefix.size()) != kEventPrefix) return std::nullopt;
  std::string problem;
  std::optional<WorkerEvent> event;
  const json parsed = json::parse(line.substr(kEventPrefix.size()), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    problem = "not a JSON object";
  } else if (!parsed.contains("event") || !parsed["event"].is_string()) {
    problem = "no \"event\" name";
  } else {
    event = read_named(parsed["event"].get<std::string>(), parsed, problem);
  }
  if (error != nullptr) *error = problem;
  return event;
}

void emit_event(const WorkerEvent& event) {
  static std::mutex mu;
  const std::string line = format_event(event) + "\n";
  std::lock_guard<std::mutex> lock(mu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace torus::process
