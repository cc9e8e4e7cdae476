#include "common/util/tunables.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "common/util/error.h"

namespace torus::tunables {
namespace {

constexpr std::array kTable = std::to_array<Tunable>({
    {"TORUS_ALLREDUCE_ALGO", Type::kString, "", "spec.allReduce.algorithm",
     "all-reduce algorithm for every bucket: auto, ring, hierarchical or torus2d"},
    {"TORUS_TORUS_X", Type::kInteger, "", "spec.allReduce.grid.x",
     "torus2d grid width (ranks along the fast dimension); must divide the world size"},
    {"TORUS_COMM_TIMEOUT_MS", Type::kInteger, "", "spec.allReduce.timeoutSeconds",
     "per-collective deadline in milliseconds (watchdog; backends get twice that)"},
    {"TORUS_COMPRESSION", Type::kString, "", "spec.allReduce.compression",
     "gradient compression on the wire: none, fp16 or bf16"},
    {"TORUS_RENDEZVOUS_TIMEOUT_MS", Type::kInteger, "120000", "",
     "how long ranks wait for each other (and rank 0's store) at start-up"},
    {"TORUS_SHM", Type::kInteger, "1", "", "0 turns the shared-memory level off (host-local ranks use TCP)"},
    {"TORUS_SHM_SLOT_BYTES", Type::kInteger, "1048576", "", "the shared-memory window reduced at a time"},
    {"TORUS_COMM_BIND_ADDR", Type::kString, "", "",
     "address the Gloo device binds; default the launch contract's TORUS_BIND_ADDRESS (a pod's IP), else loopback "
     "when MASTER_ADDR is loopback, else the host name"},
    {"TORUS_COST_SHM_LATENCY_US", Type::kNumber, "3.3", "", "cost model: shared-memory latency per step"},
    {"TORUS_COST_SHM_GBPS", Type::kNumber, "4.4", "", "cost model: shared-memory bandwidth"},
    {"TORUS_COST_NET_LATENCY_US", Type::kNumber, "60", "", "cost model: TCP latency per step"},
    {"TORUS_COST_NET_GBPS", Type::kNumber, "0.85", "", "cost model: TCP bandwidth"},
    {"TORUS_NUM_THREADS", Type::kInteger, "", "",
     "CPU math threads of a rank when spec.gang.threadsPerProcess is unset; default the CPUs it may use"},
    {"TORUS_CPU_WINOGRAD", Type::kInteger, "1", "",
     "CPU: 1 runs 3x3 stride-1 convolutions as Winograd F(4x4, 3x3) where oneDNN has it for the shape (AVX-512), "
     "0 keeps every convolution direct"},
    {"TORUS_LOOPBACK_ONLY", Type::kInteger, "0", "",
     "1 refuses every connection outside loopback (127.0.0.0/8, ::1); every test runs with it"},
    {"TORUS_LOG_LEVEL", Type::kString, "info", "",
     "log threshold of every Torus process: debug, info, warn or error (`torus run` passes it to its ranks)"},
    {"TORUS_WORKER_BINARY", Type::kString, "", "",
     "`torus run`: the torus-worker executable it starts; default the one next to `torus` (e.g. a sanitizer build)"},
    {"TORUS_TEST_SIGKILL_AT_STEP", Type::kString, "", "",
     "tests only: RANK:STEP makes that rank of attempt 0 SIGKILL itself after that global step (known lost work)"},
    {"TORUS_TEST_SIGSTOP_AT_STEP", Type::kString, "", "",
     "tests only: RANK:STEP makes that rank of attempt 0 SIGSTOP itself after that global step, until a SIGCONT "
     "(its peers wait alive in the next collective)"},
    {"TORUS_CUDA_TF32", Type::kInteger, "1", "", "GPU: 1 lets fp32 convolutions and GEMMs use TF32, 0 denies it"},
    {"TORUS_CUDNN_BENCHMARK", Type::kInteger, "0", "", "GPU: 1 times the cuDNN convolution algorithms"},
    {"TORUS_CUDNN_DETERMINISTIC", Type::kInteger, "0", "",
     "GPU: 1 uses deterministic conv algorithms and max pooling only"},
    {"TORUS_CUDNN_BN_FUSION", Type::kInteger, "1", "", "GPU: 0 turns the fused cuDNN batch norm + ReLU off"},
    {"TORUS_CUDNN_WORKSPACE_MB", Type::kInteger, "512", "", "GPU: workspace one convolution algorithm may use"},
    {"TORUS_NCCL_GRAPHS", Type::kInteger, "0", "",
     "GPU, several ranks: 1 captures steps as CUDA graphs with the NCCL gradient all-reduce inside (0: eager steps)"},
});

bool well_typed(Type type, const std::string& value) {
  if (type == Type::kString) return true;
  try {
    size_t used = 0;
    if (type == Type::kInteger)
      (void)std::stoll(value, &used);
    else
      (void)std::stod(value, &used);
    return used == value.size();
  } catch (const std::exception&) {
    return false;
  }
}

void check(const Tunable& t, const std::string& value) {
  if (!well_typed(t.type, value))
    throw InvalidArgument("environment variable " + std::string(t.name) + ": expected " +
                          (t.type == Type::kInteger ? "an integer" : "a number") + ", got '" + value + "'");
}

}  // namespace

std::span<const Tunable> table() { return kTable; }

const Tunable& declared(std::string_view name) {
  const auto it = std::find_if(kTable.begin(), kTable.end(), [&](const Tunable& t) { return t.name == name; });
  if (it == kTable.end())
    throw InvalidArgument("tunable " + std::string(name) + ": not declared in common/util/tunables.cc");
  return *it;
}

std::string_view to_string(Type type) {
  switch (type) {
    case Type::kInteger:
      return "integer";
    case Type::kNumber:
      return "number";
    case Type::kString:
      return "string";
  }
  return "?";
}

Snapshot Snapshot::from_environment() {
  Snapshot s;
  for (const Tunable& t : kTable) {
    const char* v = std::getenv(std::string(t.name).c_str());
    if (v == nullptr || *v == '\0') continue;
    check(t, v);
    s.values_.emplace(std::string(t.name), v);
  }
  return s;
}

Snapshot Snapshot::of(std::map<std::string, std::string> values) {
  Snapshot s;
  for (auto& [name, value] : values) {
    check(declared(name), value);
    s.values_.emplace(name, std::move(value));
  }
  return s;
}

std::optional<std::string> Snapshot::text(std::string_view name) const {
  declared(name);
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> Snapshot::integer(std::string_view name) const {
  const auto v = text(name);
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

std::optional<double> Snapshot::number(std::string_view name) const {
  const auto v = text(name);
  if (!v) return std::nullopt;
  return std::stod(*v);
}

std::vector<std::string> Snapshot::describe() const {
  std::vector<std::string> out;
  for (const Tunable& t : kTable) {
    const auto it = values_.find(t.name);
    if (it != values_.end()) out.push_back(std::string(t.name) + "=" + it->second);
  }
  return out;
}

const Snapshot& process_snapshot() {
  static const Snapshot snapshot = Snapshot::from_environment();
  return snapshot;
}

}  // namespace torus::tunables
