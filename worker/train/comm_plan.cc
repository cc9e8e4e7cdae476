#include "worker/train/comm_plan.h"

#include <cmath>
#include <sstream>

namespace torus::worker::train {
namespace {

comm::Algorithm to_comm(api::AllReduceAlgorithm a) {
  switch (a) {
    case api::AllReduceAlgorithm::kAuto:
      return comm::Algorithm::kAuto;
    case api::AllReduceAlgorithm::kRing:
      return comm::Algorithm::kRing;
    case api::AllReduceAlgorithm::kHierarchical:
      return comm::Algorithm::kHierarchical;
    case api::AllReduceAlgorithm::kTorus2d:
      return comm::Algorithm::kTorus2D;
  }
  return comm::Algorithm::kAuto;
}

comm::Compression to_comm(api::Compression c) {
  switch (c) {
    case api::Compression::kNone:
      return comm::Compression::kNone;
    case api::Compression::kFp16:
      return comm::Compression::kFloat16;
    case api::Compression::kBf16:
      return comm::Compression::kBFloat16;
  }
  return comm::Compression::kNone;
}

std::string predictions(const comm::Planner& planner, size_t bytes) {
  std::ostringstream os;
  os.precision(3);
  const char* sep = "";
  for (comm::Algorithm a : {comm::Algorithm::kRing, comm::Algorithm::kHierarchical, comm::Algorithm::kTorus2D}) {
    const double t = planner.predict(a, bytes);
    os << sep << comm::to_string(a) << " " << (std::isinf(t) ? std::string("n/a") : "");
    if (!std::isinf(t)) os << t * 1e3 << " ms";
    sep = ", ";
  }
  return os.str();
}

}  // namespace

comm::WorldOptions world_options(const CommRunOptions& c, const tunables::Snapshot& env) {
  comm::WorldOptions o = comm::WorldOptions::from_tunables(env);
  o.timeout = c.timeout;
  o.algorithm = to_comm(c.algorithm);
  o.torus_x = c.grid_x;
  return o;
}

comm::ReducerOptions reducer_options(const CommRunOptions& c) {
  comm::ReducerOptions r;
  r.buckets.first_bucket_bytes = c.first_bucket_bytes;
  r.buckets.bucket_cap_bytes = c.bucket_cap_bytes;
  r.compression = to_comm(c.compression);
  return r;
}

std::vector<std::string> describe_plan(const comm::Planner& planner, const CommRunOptions& c) {
  std::vector<std::string> out;
  const size_t element = c.compression == api::Compression::kNone ? 4 : 2;
  for (const auto& [what, fp32_bytes] : {std::pair<const char*, size_t>{"first bucket", c.first_bucket_bytes},
                                         std::pair<const char*, size_t>{"other buckets", c.bucket_cap_bytes}}) {
    const size_t bytes = fp32_bytes / 4 * element;  // what goes on the wire
    std::ostringstream os;
    os << "all-reduce of the " << what << " (up to " << bytes << " bytes on the wire): ";
    if (c.algorithm != api::AllReduceAlgorithm::kAuto) {
      os << api::to_string(c.algorithm) << " (spec.allReduce.algorithm)";
    } else {
      os << comm::to_string(planner.choose(bytes)) << " (auto: the cost model's cheapest; predicted "
         << predictions(planner, bytes) << ")";
    }
    out.push_back(os.str());
  }
  return out;
}

}  // namespace torus::worker::train
