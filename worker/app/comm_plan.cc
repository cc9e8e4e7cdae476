#include "worker/app/comm_plan.h"

#include <cmath>
#include <sstream>

namespace torus::worker::app {
namespace {

// What goes on the wire for `fp32_bytes` of gradients: half with 16-bit compression.
size_t wire_bytes(const CommRunOptions& c, size_t fp32_bytes) {
  return fp32_bytes / 4 * (c.compression == api::Compression::kNone ? 4 : 2);
}

std::string predictions(const comm::Planner& planner, size_t bytes) {
  std::ostringstream os;
  os.precision(3);
  const char* sep = "";
  for (api::AllReduceAlgorithm a :
       {api::AllReduceAlgorithm::kRing, api::AllReduceAlgorithm::kHierarchical, api::AllReduceAlgorithm::kTorus2d}) {
    const double t = planner.predict(a, bytes);
    os << sep << api::to_string(a) << " " << (std::isinf(t) ? std::string("n/a") : "");
    if (!std::isinf(t)) os << t * 1e3 << " ms";
    sep = ", ";
  }
  return os.str();
}

}  // namespace

comm::WorldOptions world_options(const CommRunOptions& c, const tunables::Snapshot& env) {
  comm::WorldOptions o = comm::WorldOptions::from_tunables(env);
  o.timeout = c.timeout;
  o.algorithm = c.algorithm;
  o.torus_x = c.grid_x;
  return o;
}

comm::ReducerOptions reducer_options(const CommRunOptions& c) {
  comm::ReducerOptions r;
  r.buckets.first_bucket_bytes = c.first_bucket_bytes;
  r.buckets.bucket_cap_bytes = c.bucket_cap_bytes;
  r.compression = c.compression;
  return r;
}

api::AllReduceAlgorithm main_algorithm(const comm::Planner& planner, const CommRunOptions& c) {
  if (c.algorithm != api::AllReduceAlgorithm::kAuto) return c.algorithm;
  return planner.choose(wire_bytes(c, c.bucket_cap_bytes));
}

std::vector<std::string> describe_plan(const comm::Planner& planner, const CommRunOptions& c) {
  std::vector<std::string> out;
  for (const auto& [what, fp32_bytes] : {std::pair<const char*, size_t>{"first bucket", c.first_bucket_bytes},
                                         std::pair<const char*, size_t>{"other buckets", c.bucket_cap_bytes}}) {
    const size_t bytes = wire_bytes(c, fp32_bytes);
    std::ostringstream os;
    os << "all-reduce of the " << what << " (up to " << bytes << " bytes on the wire): ";
    if (c.algorithm != api::AllReduceAlgorithm::kAuto) {
      os << api::to_string(c.algorithm) << " (spec.allReduce.algorithm)";
    } else {
      os << api::to_string(planner.choose(bytes)) << " (auto: the cost model's cheapest; predicted "
         << predictions(planner, bytes) << ")";
    }
    out.push_back(os.str());
  }
  return out;
}

}  // namespace torus::worker::app
