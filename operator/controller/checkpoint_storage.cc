#include "operator/controller/checkpoint_storage.h"

#include "operator/controller/children.h"
#include "operator/controller/labels.h"

namespace torus::controller {
namespace {

using json = nlohmann::json;

// Volume sources whose data outlives the pod (emptyDir, configMap, secret, downwardAPI, projected and ephemeral
// volumes do not).
constexpr std::string_view kLasting[] = {"persistentVolumeClaim",
                                         "hostPath",
                                         "nfs",
                                         "csi",
                                         "cephfs",
                                         "rbd",
                                         "glusterfs",
                                         "iscsi",
                                         "fc",
                                         "azureFile",
                                         "azureDisk",
                                         "awsElasticBlockStore",
                                         "gcePersistentDisk",
                                         "cinder",
                                         "portworxVolume",
                                         "vsphereVolume"};

bool lasts(const json& volume) {
  for (std::string_view source : kLasting) {
    if (volume.contains(source)) return true;
  }
  return false;
}

// `dir` is `mount` or below it.
bool under(const std::string& dir, std::string mount) {
  if (mount.empty()) return false;
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  return dir == mount || mount == "/" || (dir.starts_with(mount) && dir[mount.size()] == '/');
}

const json& member_or_empty(const json& object, const char* key) {
  static const json kEmpty;
  if (!object.is_object()) return kEmpty;
  auto it = object.find(key);
  return it == object.end() ? kEmpty : *it;
}

// The worker container's writable mounts of lasting volumes in the user's template.
bool template_keeps(const api::TrainingJob& job, const std::string& dir) {
  const json& spec = member_or_empty(job.spec.gang.pod_template, "spec");
  const json& volumes = member_or_empty(spec, "volumes");
  const json& containers = member_or_empty(spec, "containers");
  if (!volumes.is_array() || !containers.is_array()) return false;
  for (const json& c : containers) {
    if (!c.is_object() || c.value("name", "") != kWorkerContainer) continue;
    const json& mounts = member_or_empty(c, "volumeMounts");
    if (!mounts.is_array()) continue;
    for (const json& m : mounts) {
      if (!m.is_object() || m.value("readOnly", false) || !under(dir, m.value("mountPath", ""))) continue;
      for (const json& v : volumes) {
        if (v.is_object() && v.value("name", "") == m.value("name", "") && lasts(v)) return true;
      }
    }
  }
  return false;
}

}  // namespace

api::FieldErrors checkpoint_storage_errors(const api::TrainingJob& job) {
  const auto& k = job.spec.training.checkpoint;
  const auto restart = job.spec.run_policy.restart_policy.value_or(api::RestartPolicy::kNever);
  if (k.dir.empty() || restart == api::RestartPolicy::kNever || !k.volume_claim_template.is_null()) return {};
  if (template_keeps(job, k.dir)) return {};
  return {{"spec.training.checkpoint.dir",
           "\"" + k.dir + "\" is on no volume that outlives the worker pods, so a restarted gang (restartPolicy " +
               std::string(api::to_string(restart)) +
               ") would start again from step 0: mount a persistentVolumeClaim, hostPath, nfs or csi volume at or "
               "above it in the worker container (spec.gang.template), or set "
               "spec.training.checkpoint.volumeClaimTemplate"}};
}

std::optional<json> build_checkpoint_claim(const api::TrainingJob& job) {
  const json& t = job.spec.training.checkpoint.volume_claim_template;
  if (!t.is_object()) return std::nullopt;
  json md = t.value("metadata", json::object());
  md["name"] = checkpoint_claim_name(job.metadata.name);
  md["namespace"] = job.metadata.namespace_;
  md["labels"] = merge_objects(md.value("labels", json::object()), child_labels(job, 0));
  md["labels"].erase(std::string(kLabelAttempt));  // the claim serves every attempt
  md["ownerReferences"] = json::array({owner_reference(job)});
  json spec = t.value("spec", json::object());
  if (!spec.contains("accessModes")) spec["accessModes"] = json::array({"ReadWriteOnce"});
  return json{{"apiVersion", "v1"}, {"kind", "PersistentVolumeClaim"}, {"metadata", md}, {"spec", spec}};
}

void mount_checkpoint_claim(const api::TrainingJob& job, int index, json& pod_spec) {
  if (index != 0 || !job.spec.training.checkpoint.volume_claim_template.is_object()) return;
  const std::string volume(kCheckpointVolume);
  pod_spec["volumes"].push_back(
      {{"name", volume}, {"persistentVolumeClaim", {{"claimName", checkpoint_claim_name(job.metadata.name)}}}});
  for (json& c : pod_spec["containers"]) {
    if (c.value("name", "") == kWorkerContainer)
      c["volumeMounts"].push_back({{"name", volume}, {"mountPath", job.spec.training.checkpoint.dir}});
  }
}

}  // namespace torus::controller
