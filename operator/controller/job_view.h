#pragma once
// The TrainingJob as a reconcile pass reads it: decoded, defaulted, checked and fingerprinted. A pure function of
// the stored object, so the same resourceVersion always gives the same view; `JobViews` keeps the last view of each
// job, since most passes (one per pod transition) see a job that has not changed since the previous pass.
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "common/api/training_job.h"
#include "common/api/validation.h"

namespace torus::controller {

struct JobView {
  api::TrainingJob job;           // with the defaults applied; status as stored
  api::FieldErrors errors;        // the decoding's, else validation's; empty for a valid spec
  std::string spec_hash;          // attempt_spec_hash of the defaulted spec (spec_edits.h)
};

// Reads only the metadata fields that are ours to read (no managedFields), the spec and the status.
std::shared_ptr<const JobView> view_job(const nlohmann::json& job);

// The last view of each job key, reused while the job's resourceVersion (and so its content) is the same.
// Thread-safe: the controller's workers reconcile different jobs at once.
class JobViews {
 public:
  std::shared_ptr<const JobView> get(const std::string& key, const nlohmann::json& job);
  void forget(const std::string& key);
  size_t size() const;

 private:
  struct Entry {
    std::string resource_version;
    std::shared_ptr<const JobView> view;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> views_;
};

}  // namespace torus::controller
