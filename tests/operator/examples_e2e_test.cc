// Issue 27.6: every example, scaled down, applied to the stand-in whose process kubelet runs each pod from its image
// (issue 37). The examples' models (ResNet-50 on 8 GPUs) cannot train here, so their pods run a probe image in place
// of the worker image: Debian's python3.11 and, as /usr/local/bin/torus-worker (the command the operator gives), a
// probe that says, from inside the pod, whether the job's data.path and checkpoint.dir exist, and on worker 0 (rank 0
// alone keeps checkpoints) leaves a file in checkpoint.dir and dies as a killed worker would (137): the next attempt's
// worker 0 must find the file there. It runs as the worker would: as 65532 under the operator's restricted security
// context, so it writes the claim only because fsGroup made it writable. GPU nodes carry the GPU taint, as a GPU
// cluster's do (issue 38.5): the imagenet example's pods must tolerate it to land there.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/api/codec.h"
#include "common/api/validation.h"
#include "tests/operator/e2e_support.h"

namespace torus::controller::e2e {
namespace {

// Runs as the container's command: /usr/bin/python3 is in every pod's root (the system folders, read-only).
constexpr const char* kProbe = R"(#!/usr/bin/python3.11
import json, os, sys
job = json.load(open(os.environ["TORUS_JOB_FILE"]))
data = job["spec"]["data"].get("path", "")
ckpt = job["spec"]["training"].get("checkpoint", {}).get("dir", "")
attempt, worker = os.environ.get("TORUS_ATTEMPT", "?"), os.environ.get("NODE_RANK", "?")
seen = lambda p: "yes" if p and os.path.isdir(p) else "no"
print(f"probe attempt={attempt} worker={worker} data={seen(data)} checkpoint={seen(ckpt)}", flush=True)
if ckpt and worker == "0":
    print("found: " + " ".join(sorted(os.listdir(ckpt))), flush=True)
    if attempt == "0":
        open(os.path.join(ckpt, "ckpt-8.torus"), "w").write("written by attempt 0")
        sys.exit(137)
)";

constexpr const char* kProbeImage = "registry.test/torus-probe:1";

// The probe image (scripts/images.py, as the product's images are made), built into `dir`; its archive.
std::string probe_image(const fs::path& dir) {
  std::ofstream(dir / "probe") << kProbe;
  const std::string archive = (dir / "probe.oci.tar").string();
  const CmdResult built = run_command(
      {"/usr/bin/python3", std::string(TORUS_SOURCE_DIR) + "/scripts/images.py", "--name", "registry.test/torus-probe",
       "--tag", "1", "--binary", "/usr/bin/python3.11", "--package", "python3.11-minimal", "--package",
       "libpython3.11-minimal", "--package", "libpython3.11-stdlib", "--file",
       (dir / "probe").string() + ":/usr/local/bin/torus-worker", "--entrypoint", "/usr/local/bin/torus-worker",
       "--work", (dir / "image-staging").string(), "--out", archive},
      120s);
  if (built.code != 0) throw std::runtime_error("the probe image: " + built.out);
  return archive;
}

class ExamplesE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kKubectl)) GTEST_SKIP() << "no kubectl at " << kKubectl;
    for (const char* bin : {"kube-standin", "torus"})
      if (!fs::exists(kBin + bin)) GTEST_SKIP() << bin << " not built";
    tmp_ = std::make_unique<test::TempDir>("torus-examples-e2e");
    dir_ = tmp_->path();
    kubeconfig_ = (dir_ / "kubeconfig").string();
    standin_ = start_standin(dir_, kubeconfig_,
                             {"--nodes", "4", "--racks", "2", "--gpu-nodes", "2", "--gpu-node-taint",
                              "nvidia.com/gpu=present:NoSchedule", "--run-pods", (dir_ / "pods").string(),
                              "--load-image", probe_image(dir_)});
    // The imagenet example gang-schedules with Volcano: this cluster has it (the stand-in's scheduler serves the
    // name), as a cluster running that example would.
    const fs::path serve = dir_ / "serve-volcano.json";
    std::ofstream(serve) << R"({"action":"serveScheduler","name":"volcano"})";
    const CmdResult served = kubectl({"create", "--raw", "/_standin/kubelet", "-f", serve.string()});
    ASSERT_EQ(served.code, 0) << served.out;
    // The operator runs as the chart's ServiceAccount (RBAC enforced); the tests' kubectl is admin.
    const std::string operator_kubeconfig = chart_service_account_kubeconfig(dir_, kubeconfig_, kNs);
    operator_ = std::make_unique<Daemon>("operator",
                                         std::vector<std::string>{kBin + "torus", "operator", "--kubeconfig",
                                                                  operator_kubeconfig, "--metrics-addr", "127.0.0.1:0"},
                                         (dir_ / "operator.log").string());
  }
  void TearDown() override {
    operator_.reset();
    standin_.reset();
    if (tmp_) expect_stayed_on_loopback(dir_);
    if (tmp_) keep_logs_if_failed(*tmp_);
  }

  CmdResult kubectl(std::vector<std::string> args, const std::string& ns = kNs) {
    args.insert(args.begin(), {kKubectl, "--kubeconfig", kubeconfig_, "--namespace", ns});
    return run_command(args, 60s);
  }

  // The example as a cluster of 4 nodes of 8 GPUs can run it: at most 2 workers, the nodes' rack label for its
  // topology, no node selector of instance types this cluster lacks.
  json scaled_down(const std::string& example) {
    json doc = api::to_json(api::load_job_file(std::string(TORUS_SOURCE_DIR) + "/examples/" + example + ".yaml"));
    doc.erase("status");
    json& spec = doc["spec"];
    spec["gang"]["workers"] = std::min(spec["gang"].value("workers", 1), 2);
    spec["gang"]["image"] = kProbeImage;
    if (spec["runPolicy"].contains("topology")) spec["runPolicy"]["topology"]["key"] = "topology.torus.dev/rack";
    if (spec["runPolicy"].contains("schedulingPolicy")) spec["runPolicy"]["schedulingPolicy"].erase("minAvailable");
    if (spec["gang"].contains("template")) spec["gang"]["template"]["spec"].erase("nodeSelector");
    return doc;
  }

  void apply(const json& doc) {
    const std::string ns = doc["metadata"].value("namespace", kNs);
    if (ns != kNs) {
      ASSERT_EQ(kubectl({"create", "namespace", ns}).code, 0);
    }
    const fs::path file = dir_ / (doc["metadata"].value("name", "") + ".json");
    std::ofstream(file) << doc.dump(2);
    const CmdResult r = kubectl({"apply", "-f", file.string()}, ns);
    ASSERT_EQ(r.code, 0) << r.out;
  }

  void wait_phase(const std::string& name, const std::string& ns, const std::string& want) {
    const CmdResult r =
        kubectl({"wait", "--for=jsonpath={.status.phase}=" + want, "trainingjob/" + name, "--timeout=90s"}, ns);
    ASSERT_EQ(r.code, 0) << name << " never reached " << want << ": " << r.out << "\n" << logs(ns, name);
  }

  // Every log of the job's pods, every attempt.
  std::string logs(const std::string& ns, const std::string& job) {
    std::string all;
    if (!fs::exists(dir_ / "pods" / ns)) return all;
    for (const auto& entry : fs::directory_iterator(dir_ / "pods" / ns)) {
      if (entry.path().filename().string().rfind(job + "-worker-", 0) == 0)
        all += read_file(entry.path() / "worker.log");
    }
    return all;
  }

  // Makes `path` (a folder) on every node's disk, as a data set preinstalled on the nodes.
  void on_every_node(const std::string& path) {
    for (int i = 0; i < 4; ++i)
      fs::create_directories(dir_ / "pods" / "_nodes" / ("node-" + std::to_string(i)) / fs::path(path).relative_path());
  }

  std::unique_ptr<test::TempDir> tmp_;
  fs::path dir_;
  std::string kubeconfig_;
  std::unique_ptr<Daemon> standin_;
  std::unique_ptr<Daemon> operator_;
};

// Data from each node's disk, checkpoints on the claim the operator makes: both there, and a restarted gang's
// worker 0 finds what attempt 0 wrote.
TEST_F(ExamplesE2E, FashionMnistAndImagenetSeeTheirDataAndKeepTheirCheckpointsThroughARestart) {
  on_every_node("/usr/share/datasets/fashion-mnist");
  for (const char* example : {"fashion-mnist", "imagenet-resnet50"}) {
    const json doc = scaled_down(example);
    const std::string name = doc["metadata"]["name"];
    const std::string ns = doc["metadata"].value("namespace", kNs);
    apply(doc);
    wait_phase(name, ns, "Succeeded");
    const std::string log = logs(ns, name);
    EXPECT_NE(log.find("probe attempt=0 worker=0 data=yes checkpoint=yes"), std::string::npos) << example << log;
    // Worker 1 as it runs to its end: attempt 0's may be deleted with the gang before it prints (worker 0 exits 137
    // a few tens of ms after its start), attempt 1's runs until it is done (the job Succeeded).
    EXPECT_NE(log.find("probe attempt=1 worker=1 data=yes"), std::string::npos) << example << log;
    EXPECT_NE(log.find("probe attempt=1 worker=0 data=yes checkpoint=yes\nfound: ckpt-8.torus"), std::string::npos)
        << example << ": the checkpoint did not survive the gang restart\n"
        << log;
  }
}

// Restart policy Never, no checkpoints: the data set on the claim it names.
TEST_F(ExamplesE2E, Cifar10SeesItsDataOnItsClaim) {
  const std::string claim = R"({"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"cifar10"},)"
                            R"("spec":{"accessModes":["ReadOnlyMany"],"resources":{"requests":{"storage":"1Gi"}}}})";
  std::ofstream(dir_ / "claim.json") << claim;
  ASSERT_EQ(kubectl({"apply", "-f", (dir_ / "claim.json").string()}).code, 0);
  const json stored = json::parse(kubectl({"get", "pvc", "cifar10", "-o", "json"}).out);
  fs::create_directories(dir_ / "pods" / "_claims" / kNs / ("cifar10-" + stored["metadata"].value("uid", "")) /
                         "cifar-10-batches-bin");
  apply(scaled_down("cifar10-resnet9"));
  wait_phase("cifar10-resnet9", kNs, "Succeeded");
  EXPECT_NE(logs(kNs, "cifar10-resnet9").find("probe attempt=0 worker=0 data=yes checkpoint=no"), std::string::npos)
      << logs(kNs, "cifar10-resnet9");
}

}  // namespace
}  // namespace torus::controller::e2e
