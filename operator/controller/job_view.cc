#include "operator/controller/job_view.h"

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "operator/controller/checkpoint_storage.h"
#include "operator/controller/spec_edits.h"

namespace torus::controller {
namespace {

using json = nlohmann::json;

json known_metadata(const json& md) {
  static const char* kKeys[] = {
      "name",       "generateName",      "namespace",         "labels",     "annotations",    "uid", "resourceVersion",
      "generation", "creationTimestamp", "deletionTimestamp", "finalizers", "ownerReferences"};
  json out = json::object();
  for (const char* k : kKeys) {
    auto it = md.find(k);
    if (it != md.end() && !it->is_null()) out[k] = *it;
  }
  return out;
}

}  // namespace

std::shared_ptr<const JobView> view_job(const json& job) {
  json doc = json::object();  // the job without the metadata fields that are not ours to read, copied once
  for (auto it = job.begin(); it != job.end(); ++it) {
    if (it.key() != "metadata") doc[it.key()] = it.value();
  }
  auto md = job.find("metadata");
  doc["metadata"] = known_metadata(md != job.end() && md->is_object() ? *md : json::object());
  api::Decoded decoded = api::decode_json(doc);
  auto view = std::make_shared<JobView>();
  view->errors = api::check_decoded(decoded);
  view->job = api::with_defaults(decoded.job);
  if (view->errors.empty()) view->errors = api::validate(view->job);
  // The operator path's own rule: checkpoints on storage that outlives pods (checkpoint_storage.h).
  if (view->errors.empty()) view->errors = checkpoint_storage_errors(view->job);
  view->spec_hash = attempt_spec_hash(api::to_json(view->job)["spec"]);
  return view;
}

std::shared_ptr<const JobView> JobViews::get(const std::string& key, const json& job) {
  std::string rv;
  if (auto md = job.find("metadata"); md != job.end() && md->is_object()) rv = md->value("resourceVersion", "");
  {
    std::lock_guard lock(mu_);
    auto it = views_.find(key);
    if (!rv.empty() && it != views_.end() && it->second.resource_version == rv) return it->second.view;
  }
  auto view = view_job(job);  // outside the lock: decoding is the expensive part
  if (!rv.empty()) {
    std::lock_guard lock(mu_);
    views_[key] = Entry{rv, view};
  }
  return view;
}

void JobViews::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  views_.erase(key);
}

size_t JobViews::size() const {
  std::lock_guard lock(mu_);
  return views_.size();
}

}  // namespace torus::controller
