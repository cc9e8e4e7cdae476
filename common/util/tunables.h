#pragma once
// Developer overrides: the environment variables a worker honours, declared once in one table (name, type, default,
// what it overrides, doc) and read once per process. Job knobs come from the TrainingJob; a variable that overrides
// a job field is a developer's escape hatch, and a rank that runs with one says so in its log.
// docs/tunables.md lists the table (a test keeps the two in agreement).
//   const tunables::Snapshot& env = tunables::process_snapshot();
//   if (auto ms = env.integer("TORUS_COMM_TIMEOUT_MS")) ...
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace torus::tunables {

enum class Type { kInteger, kNumber, kString };

struct Tunable {
  std::string_view name;
  Type type;
  std::string_view default_value;  // as documented; "" when the default is computed (see doc)
  std::string_view overrides;      // the job field it overrides, "" for a knob no job field has
  std::string_view doc;
};

// Every tunable, in the order docs/tunables.md lists them.
std::span<const Tunable> table();
// The declaration of `name`; throws InvalidArgument for a name the table does not declare.
const Tunable& declared(std::string_view name);
std::string_view to_string(Type type);

// The values of the declared variables that are set, checked against their types.
class Snapshot {
 public:
  Snapshot() = default;
  // Reads every declared variable from the process environment; InvalidArgument names a malformed one.
  static Snapshot from_environment();
  // For tests: `values` by name (each must be declared and well-typed).
  static Snapshot of(std::map<std::string, std::string> values);

  std::optional<std::string> text(std::string_view name) const;
  std::optional<int64_t> integer(std::string_view name) const;
  std::optional<double> number(std::string_view name) const;
  // "NAME=value" for every set variable, in table order.
  std::vector<std::string> describe() const;
  bool empty() const { return values_.empty(); }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// The process's snapshot, read from the environment on first use.
const Snapshot& process_snapshot();

}  // namespace torus::tunables
