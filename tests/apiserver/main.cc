// kube-standin: the Kubernetes API stand-in as a process, for the Helm chart test, scripts and the operator
// benchmark. Prints its URL on the first line of stdout, then serves until SIGINT or SIGTERM.
//
//   kube-standin [--address 127.0.0.1] [--port 0] [--kubelet] [--nodes 4] [--racks 2] [--gpus-per-node 8]
//                [--gpu-nodes N] [--gpu-node-taint nvidia.com/gpu=present:NoSchedule] [--start-delay-ms 0] [--history 50000] [--bookmark-interval-ms 10000] [--crds FILE_OR_DIR]...
//                [--kubeconfig PATH] [--tls-dir DIR] [--no-auth]
//                [--run-pods DIR [--pod-command NAME=PATH]... [--pod-image IMAGE=PATH]... [--pod-env NAME=VALUE]...
//                 [--load-image ARCHIVE]... [--registry-image ARCHIVE]... [--image-pull-backoff-ms 10000]]
//
// --run-pods runs every pod the kubelet starts as local processes (tests/apiserver/process_kubelet.h), each container
// in its own mount namespace and private root (pod_root.h; the stand-in must run as root), with a folder
// per pod under DIR; --pod-command maps a container's command to a program (torus-worker=build/bin/torus-worker),
// --pod-image maps an image (without its tag) to the program its entrypoint runs, for containers without a command
// (ghcr.io/torus-dev/torus-operator=build/bin/torus), --pod-env adds a variable to every container; containers get
// the service-account token projected and KUBERNETES_SERVICE_HOST/PORT pointing here. --load-image puts an OCI
// image archive's images on every node (`kind load image-archive`; scripts/images.sh builds them), --registry-image
// into the registry the nodes pull from; a container whose command or image is not mapped runs from its image
// (runtime/image_manager.h: pulled by its imagePullPolicy, ErrImagePull/ImagePullBackOff otherwise, the pull
// back-off's first period --image-pull-backoff-ms). With --kubelet, the workload
// controllers run too (workload_controllers.h: Deployments make ReplicaSets make pods, as kube-controller-manager
// does).
//
// --gpu-nodes N gives the GPUs to the first N nodes only (the others are CPU nodes; default: every node);
// --gpu-node-taint puts that taint (KEY[=VALUE]:EFFECT) on every node with GPUs, as a GPU cluster's are (default:
// none, so pods without the toleration run there too).
//
// --tls-dir serves HTTPS with a fresh CA and writes ca.crt, client.crt and client.key (CN standin-admin,
// O system:masters) into DIR, and then authenticates like an apiserver without anonymous access: the bearer token
// "standin-token" (its kubeconfig's) or that client certificate, else 401; /_standin/auth rotates the tokens;
// --no-auth turns that off. Plain HTTP never authenticates, like the apiserver's old insecure port: kubectl sends
// no credentials over it.
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/log/log.h"
#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "tests/apiserver/kubelet_sim.h"
#include "tests/apiserver/server.h"
#include "tests/apiserver/workload_controllers.h"
#include "tests/apiserver/yaml_json.h"

namespace {

using torus::InvalidArgument;
namespace standin = torus::standin;

struct Flags {
  standin::ServerOptions server;
  bool kubelet = false;
  standin::KubeletOptions kubelet_options;
  std::vector<std::string> crds;
  std::string kubeconfig;
  std::string tls_dir;
};

int int_flag(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == value.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw InvalidArgument(name + ": expected a non-negative integer, got \"" + value + "\"");
}

std::pair<std::string, std::string> assignment(const std::string& name, const std::string& value) {
  const auto eq = value.find('=');
  if (eq == std::string::npos || eq == 0) throw InvalidArgument(name + ": expected NAME=VALUE, got \"" + value + "\"");
  return {value.substr(0, eq), value.substr(eq + 1)};
}

standin::SandboxOptions& sandbox(Flags& flags) {
  if (!flags.kubelet_options.processes) flags.kubelet_options.processes.emplace();
  return *flags.kubelet_options.processes;
}

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  bool no_auth = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument(arg + ": expected a value");
      return argv[++i];
    };
    if (arg == "--address") {
      flags.server.address = value();
    } else if (arg == "--port") {
      flags.server.port = static_cast<uint16_t>(int_flag(arg, value()));
    } else if (arg == "--kubelet") {
      flags.kubelet = true;
    } else if (arg == "--nodes") {
      flags.kubelet_options.pool.nodes = int_flag(arg, value());
    } else if (arg == "--racks") {
      flags.kubelet_options.pool.racks = int_flag(arg, value());
    } else if (arg == "--gpus-per-node") {
      flags.kubelet_options.pool.gpus_per_node = int_flag(arg, value());
    } else if (arg == "--gpu-nodes") {
      flags.kubelet_options.pool.gpu_nodes = int_flag(arg, value());
    } else if (arg == "--gpu-node-taint") {
      flags.kubelet_options.pool.gpu_taint = standin::parse_taint(value(), arg);
    } else if (arg == "--start-delay-ms") {
      flags.kubelet_options.start_delay = std::chrono::milliseconds(int_flag(arg, value()));
    } else if (arg == "--history") {
      flags.server.store.history_limit = static_cast<size_t>(int_flag(arg, value()));
    } else if (arg == "--bookmark-interval-ms") {
      flags.server.store.bookmark_interval = std::chrono::milliseconds(int_flag(arg, value()));
    } else if (arg == "--crds") {
      flags.crds.push_back(value());
    } else if (arg == "--kubeconfig") {
      flags.kubeconfig = value();
    } else if (arg == "--tls-dir") {
      flags.tls_dir = value();
    } else if (arg == "--run-pods") {
      sandbox(flags).root = value();
    } else if (arg == "--pod-command") {
      sandbox(flags).commands.insert(assignment(arg, value()));
    } else if (arg == "--pod-image") {
      sandbox(flags).images.insert(assignment(arg, value()));
    } else if (arg == "--pod-env") {
      sandbox(flags).env.insert(assignment(arg, value()));
    } else if (arg == "--load-image") {
      flags.kubelet_options.node_images.push_back(value());
    } else if (arg == "--registry-image") {
      flags.kubelet_options.registry_images.push_back(value());
    } else if (arg == "--image-pull-backoff-ms") {
      sandbox(flags).pull_backoff.initial = std::chrono::milliseconds(int_flag(arg, value()));
    } else if (arg == "--no-auth") {
      no_auth = true;
    } else {
      throw InvalidArgument("unknown flag \"" + arg + "\" (see the header of tests/apiserver/main.cc)");
    }
  }
  if (flags.kubelet_options.processes && flags.kubelet_options.processes->root.empty()) {
    throw InvalidArgument("--pod-command, --pod-image, --pod-env and --image-pull-backoff-ms need --run-pods DIR");
  }
  if ((!flags.kubelet_options.node_images.empty() || !flags.kubelet_options.registry_images.empty()) &&
      !flags.kubelet_options.processes) {
    throw InvalidArgument("--load-image and --registry-image need --run-pods DIR");
  }
  if (!flags.tls_dir.empty() && !no_auth) {
    flags.server.authentication = standin::ServerOptions::Authentication::kRequired;
  }
  return flags;
}

std::vector<std::string> manifest_files(const std::string& path) {
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      std::string ext = entry.path().extension().string();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  return files;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw torus::SystemError("kube-standin: cannot write " + path.string());
}

// A CA, server and client certificate for this run; the client's and the CA's files go to `dir` for the tests.
standin::TlsMaterial make_tls(const std::string& dir) {
  standin::TlsMaterial tls = standin::make_tls_material();
  std::filesystem::create_directories(dir);
  write_file(std::filesystem::path(dir) / "ca.crt", tls.ca_cert_pem);
  write_file(std::filesystem::path(dir) / "client.crt", tls.client_cert_pem);
  write_file(std::filesystem::path(dir) / "client.key", tls.client_key_pem);
  std::filesystem::permissions(std::filesystem::path(dir) / "client.key",
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return tls;
}

void load_crds(standin::Store& store, const std::vector<std::string>& paths) {
  const standin::ResourceType& crd_type =
      *store.registry().find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
  for (const std::string& path : paths) {
    for (const std::string& file : manifest_files(path)) {
      for (const nlohmann::json& doc : standin::yaml_file_documents(file)) {
        if (doc.value("kind", "") != "CustomResourceDefinition") continue;
        try {
          store.create(crd_type, "", doc);
        } catch (const standin::ApiError& e) {
          throw InvalidArgument(file + ": " + e.what());
        }
      }
    }
  }
}

int run(int argc, char** argv) {
  Flags flags = parse_flags(argc, argv);
  if (!flags.tls_dir.empty()) flags.server.tls = make_tls(flags.tls_dir);
  // Block the stop signals before any thread starts, so every thread inherits the mask and sigwait gets them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  standin::ApiServer server(flags.server);
  load_crds(server.store(), flags.crds);
  server.start();
  std::unique_ptr<standin::KubeletSim> kubelet;
  std::unique_ptr<standin::WorkloadControllers> controllers;
  if (flags.kubelet_options.processes) {
    // As a kubelet does: tokens from the TokenRequest API, and the `kubernetes` Service's address (ours).
    flags.kubelet_options.processes->mint_token = [&server](const std::string& ns, const std::string& account) {
      return server.mint_service_account_token(ns, account);
    };
    flags.kubelet_options.processes->service_host = flags.server.address;
    flags.kubelet_options.processes->service_port = server.port();
    // A test's rule that nothing leaves this machine (common/util/destination.h) holds in its pods too: a container
    // from an image gets none of the stand-in's environment otherwise.
    if (const char* loopback = std::getenv("TORUS_LOOPBACK_ONLY"); loopback != nullptr)
      flags.kubelet_options.processes->env.emplace("TORUS_LOOPBACK_ONLY", loopback);
  }
  if (flags.kubelet) {
    kubelet = std::make_unique<standin::KubeletSim>(server, flags.kubelet_options);
    controllers = std::make_unique<standin::WorkloadControllers>(server.store());
  }
  if (!flags.kubeconfig.empty()) server.write_kubeconfig(flags.kubeconfig);
  std::printf("%s\n", server.url().c_str());
  std::fflush(stdout);
  TLOG(Info) << "kube-standin serving on " << server.url();
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  TLOG(Info) << "kube-standin: signal " << signal_number << ", stopping";
  controllers.reset();
  kubelet.reset();
  server.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("kube-standin", [&] { return run(argc, argv); });
}
