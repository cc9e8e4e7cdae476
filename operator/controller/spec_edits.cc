#include "operator/controller/spec_edits.h"

#include <cstdio>
#include <set>

#include "common/api/codec.h"

namespace torus::controller {
namespace {

std::string show(const json* v) { return v ? v->dump() : "unset"; }

void diff(const json* before, const json* after, const std::string& path, std::vector<std::string>& out) {
  const bool objects = before && after && before->is_object() && after->is_object();
  if (!objects) {
    if (!before || !after || *before != *after) out.push_back(path + ": " + show(before) + " -> " + show(after));
    return;
  }
  // Both sides are objects: walk the union of their keys in order.
  std::set<std::string> keys;
  for (auto it = before->begin(); it != before->end(); ++it) keys.insert(it.key());
  for (auto it = after->begin(); it != after->end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    auto b = before->find(k);
    auto a = after->find(k);
    diff(b == before->end() ? nullptr : &*b, a == after->end() ? nullptr : &*a, path + "." + k, out);
  }
}

}  // namespace

json attempt_spec(const json& spec) {
  json out = spec.is_object() ? spec : json::object();
  auto policy = out.find("runPolicy");
  if (policy != out.end() && policy->is_object()) {
    for (const char* field : kLiveRunPolicyFields) policy->erase(field);
  }
  return out;
}

std::string attempt_spec_hash(const json& spec) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  for (unsigned char c : attempt_spec(spec).dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

bool edit_starts_a_new_run(const json& before, const json& after) {
  auto identity = [](const json& spec) {
    const json training = spec.value("training", json::object());
    return json{{"model", spec.value("model", json::object())}, {"seed", training.value("seed", json())}};
  };
  return identity(before) != identity(after);
}

std::string start_after_edit(api::TrainingJobStatus& status, const api::TrainingJob& job, const json& before) {
  if (before.is_null() || !edit_starts_a_new_run(before, api::to_json(job)["spec"])) return " from the last checkpoint";
  status.run = new_run_for_edit(job);
  status.last_checkpoint = {};  // the old run's: the new run's pods must not be told to find it
  return " as a new run " + status.run + " from step 0 (the model or the seed changed: the checkpoints do not fit)";
}

std::string run_of(const api::TrainingJob& job) { return job.status.run.empty() ? job.metadata.uid : job.status.run; }

std::string new_run_for_edit(const api::TrainingJob& job) {
  return job.metadata.uid + "-g" + std::to_string(job.metadata.generation.value_or(0));
}

std::vector<std::string> changed_fields(const json& before, const json& after, size_t limit) {
  const json b = attempt_spec(before);
  const json a = attempt_spec(after);
  std::vector<std::string> all;
  diff(&b, &a, "spec", all);
  if (all.size() <= limit) return all;
  std::vector<std::string> out(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(limit));
  out.push_back("... and " + std::to_string(all.size() - limit) + " more");
  return out;
}

}  // namespace torus::controller
