// worker_security.h: a worker pod passes Pod Security "restricted" by default, its template overrides each field,
// the worker writes only volumes (/tmp an emptyDir unless the template mounts one), and GPU pods tolerate the GPU
// taint once. Built through build_worker_pod, the one builder the planner calls.
#include "operator/controller/worker_security.h"

#include <gtest/gtest.h>

#include "operator/controller/children.h"
#include "operator/controller/labels.h"

namespace torus::controller {
namespace {

api::TrainingJob job_with(const json& pod_template, api::Device device = api::Device::kCpu) {
  api::TrainingJob job;
  job.metadata.name = "w";
  job.metadata.namespace_ = "ns";
  job.spec.gang.workers = 1;
  job.spec.gang.device = device;
  job.spec.gang.image = "ghcr.io/torus-dev/torus-worker:0.1.0";
  job.spec.gang.pod_template = pod_template;
  return job;
}

const json& worker_of(const json& pod) {
  for (const json& c : pod["spec"]["containers"]) {
    if (c["name"] == kWorkerContainer) return c;
  }
  throw std::runtime_error("no worker container");
}

int mounts_at(const json& container, const std::string& path) {
  int n = 0;
  for (const json& m : container["volumeMounts"]) n += m["mountPath"] == path;
  return n;
}

TEST(WorkerSecurity, APodIsRestrictedByDefault) {
  const json pod = build_worker_pod(job_with(json::object()), 0, 0);
  const json& sc = pod["spec"]["securityContext"];
  EXPECT_EQ(sc["runAsNonRoot"], true);
  EXPECT_EQ(sc["runAsUser"], kWorkerUser);
  EXPECT_EQ(sc["runAsGroup"], kWorkerUser);
  EXPECT_EQ(sc["fsGroup"], kWorkerUser);
  EXPECT_EQ(sc["fsGroupChangePolicy"], "OnRootMismatch");
  EXPECT_EQ(sc["seccompProfile"]["type"], "RuntimeDefault");
  const json& c = worker_of(pod)["securityContext"];
  EXPECT_EQ(c["allowPrivilegeEscalation"], false);
  EXPECT_EQ(c["readOnlyRootFilesystem"], true);
  EXPECT_EQ(c["capabilities"]["drop"], json::array({"ALL"}));
  EXPECT_EQ(mounts_at(worker_of(pod), "/tmp"), 1);
  EXPECT_FALSE(pod["spec"].contains("tolerations"));
}

TEST(WorkerSecurity, TheTemplateOverridesFieldByField) {
  const json tmpl = {
      {"spec",
       {{"securityContext", {{"runAsUser", 1000}, {"fsGroupChangePolicy", "Always"}}},
        {"containers", json::array({{{"name", "worker"},
                                     {"securityContext", {{"readOnlyRootFilesystem", false}}},
                                     {"volumeMounts", json::array({{{"name", "scratch"}, {"mountPath", "/tmp"}}})}}})},
        {"volumes", json::array({{{"name", "scratch"}, {"emptyDir", {{"medium", "Memory"}}}}})}}}};
  const json pod = build_worker_pod(job_with(tmpl), 0, 0);
  const json& sc = pod["spec"]["securityContext"];
  EXPECT_EQ(sc["runAsUser"], 1000);
  EXPECT_EQ(sc["fsGroupChangePolicy"], "Always");
  EXPECT_EQ(sc["fsGroup"], kWorkerUser);  // what the template leaves alone stays
  EXPECT_EQ(sc["runAsNonRoot"], true);
  const json& c = worker_of(pod)["securityContext"];
  EXPECT_EQ(c["readOnlyRootFilesystem"], false);
  EXPECT_EQ(c["allowPrivilegeEscalation"], false);
  EXPECT_EQ(mounts_at(worker_of(pod), "/tmp"), 1);  // the user's, not a second one
  for (const json& v : pod["spec"]["volumes"]) EXPECT_NE(v["name"], "torus-tmp");
}

TEST(WorkerSecurity, GpuPodsTolerateTheGpuTaintOnce) {
  const json pod = build_worker_pod(job_with(json::object(), api::Device::kGpu), 0, 0);
  EXPECT_EQ(pod["spec"]["tolerations"],
            json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}));
  const json own = {{"spec",
                     {{"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}},
                                                   {{"key", "team"}, {"value", "a"}, {"effect", "NoSchedule"}}})}}}};
  const json kept = build_worker_pod(job_with(own, api::Device::kGpu), 0, 0);
  EXPECT_EQ(kept["spec"]["tolerations"], own["spec"]["tolerations"]);
  const json other = {{"spec", {{"tolerations", json::array({{{"key", "team"}, {"operator", "Exists"}}})}}}};
  EXPECT_EQ(build_worker_pod(job_with(other, api::Device::kGpu), 0, 0)["spec"]["tolerations"].size(), 2u);
}

}  // namespace
}  // namespace torus::controller
