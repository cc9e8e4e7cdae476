#include "tests/apiserver/runtime/container_launch.h"

#include <algorithm>
#include <cstdlib>

#include "common/util/error.h"
#include "tests/apiserver/runtime/container_security.h"

namespace torus::standin {
namespace fs = std::filesystem;

std::string field_value(const json& pod, const std::string& path, const std::string& where) {
  const json& meta = pod["metadata"];
  const json status = pod.value("status", json::object());
  if (path == "metadata.name") return meta.value("name", "");
  if (path == "metadata.namespace") return meta.value("namespace", "");
  if (path == "metadata.uid") return meta.value("uid", "");
  if (path == "spec.nodeName") return pod["spec"].value("nodeName", "");
  if (path == "spec.serviceAccountName") return pod["spec"].value("serviceAccountName", "default");
  if (path == "status.podIP") return status.value("podIP", "");
  if (path == "status.hostIP") return status.value("hostIP", "");
  throw InvalidArgument(where + ".valueFrom.fieldRef.fieldPath: \"" + path + "\" is not served by the process kubelet");
}

namespace {

// A volume's subPath: a folder inside it, made when missing (the kubelet's subpath mounter).
fs::path subpath_folder(const fs::path& volume, const std::string& sub) {
  const fs::path dir = volume / fs::path(sub).relative_path();
  fs::create_directories(dir);
  return dir;
}

// One container's environment. Values stay as written: a DNS name is resolved by the container, through the
// /etc/hosts its kubelet keeps (cluster_dns.h).
std::map<std::string, std::string> container_env(const json& pod, const json& container) {
  std::map<std::string, std::string> env;
  for (const json& e : container.value("env", json::array())) {
    const std::string name = e.value("name", "");
    const std::string where = "spec.containers[" + container.value("name", "") + "].env[" + name + "]";
    if (e.contains("valueFrom")) {
      if (!e["valueFrom"].contains("fieldRef"))
        throw InvalidArgument(where + ".valueFrom: the process kubelet serves fieldRef only");
      env[name] = field_value(pod, e["valueFrom"]["fieldRef"].value("fieldPath", ""), where);
      continue;
    }
    env[name] = e.value("value", "");
  }
  return env;
}

// The image without its tag or digest: ghcr.io/torus-dev/torus-operator:0.4.0 -> ghcr.io/torus-dev/torus-operator.
std::string image_repository(std::string image) {
  if (const auto at = image.find('@'); at != std::string::npos) image.resize(at);
  const auto colon = image.rfind(':');
  if (colon != std::string::npos && image.find('/', colon) == std::string::npos) image.resize(colon);
  return image;
}

// $(NAME) in a command or argument becomes the container's variable NAME, as the kubelet expands them; $$(NAME)
// escapes, and a reference to an unknown variable stays as written.
std::string expand_references(const std::string& text, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out += text[i];
    } else if (text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (const size_t close = text.find(')', i); text[i + 1] == '(' && close != std::string::npos) {
      const auto it = env.find(text.substr(i + 2, close - i - 2));
      out += it != env.end() ? it->second : text.substr(i, close - i + 1);
      i = close;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::vector<std::string> container_command(const json& container, const SandboxOptions& options) {
  std::vector<std::string> argv;
  for (const json& a : container.value("command", json::array())) argv.push_back(a.get<std::string>());
  if (argv.empty()) {
    auto entrypoint = options.images.find(image_repository(container.value("image", "")));
    if (entrypoint == options.images.end())
      throw InvalidArgument("spec.containers[" + container.value("name", "") +
                            "].command: required by the process kubelet unless its image's entrypoint is mapped "
                            "(--pod-image); image \"" +
                            container.value("image", "") + "\" is not");
    argv.push_back(entrypoint->second);
  }
  for (const json& a : container.value("args", json::array())) argv.push_back(a.get<std::string>());
  auto it = options.commands.find(argv[0]);
  if (it != options.commands.end()) argv[0] = it->second;
  return argv;
}

// Where each container sees its pod's name-service files (written by write_pod_dns into dns_folder).
constexpr const char* kDnsFolder = "/.standin/dns";
constexpr const char* kDnsFiles[] = {"hosts", "resolv.conf", "nsswitch.conf", "hostname"};

// Docker's and containerd's default /dev/shm: what a pod gets unless it mounts a volume there.
constexpr uint64_t kDefaultShmBytes = 64ull << 20;

// The pod's own mounts in every container's root: its name service, the termination log, then the volumes the
// container mounts, parents first.
void add_pod_mounts(RootPlan& plan, const json& c, const Volumes& volumes, const fs::path& dir) {
  const std::string where = "spec.containers[" + c.value("name", "") + "]";
  // The pod's name service, as a runtime bind-mounts the kubelet's files; here as links into one folder, so that a
  // file the kubelet replaces (by rename, atomic for a reader) is the one the container reads next.
  plan.mounts.push_back({RootMount::Kind::kBind, dns_folder(dir).string(), kDnsFolder, RootMount::Access::kReadOnly});
  for (const char* file : kDnsFiles) {
    plan.mounts.push_back(
        {RootMount::Kind::kSymlink, std::string(kDnsFolder) + "/" + file, std::string("/etc/") + file});
  }
  const std::string message_path = c.value("terminationMessagePath", "/dev/termination-log");
  if (!fs::path(message_path).is_absolute())
    throw InvalidArgument(where + ".terminationMessagePath: must be absolute, got \"" + message_path + "\"");
  plan.mounts.push_back({RootMount::Kind::kBind, termination_log(dir, c).string(), message_path});
  std::vector<json> mounts = c.value("volumeMounts", json::array()).get<std::vector<json>>();
  std::stable_sort(mounts.begin(), mounts.end(), [](const json& a, const json& b) {
    return a.value("mountPath", "").size() < b.value("mountPath", "").size();
  });
  for (const json& m : mounts) {
    auto it = volumes.find(m.value("name", ""));
    if (it == volumes.end())
      throw InvalidArgument(where + ".volumeMounts[" + m.value("name", "") + "]: no such volume");
    const std::string target = m.value("mountPath", "");
    if (!fs::path(target).is_absolute())
      throw InvalidArgument(where + ".volumeMounts[" + m.value("name", "") + "].mountPath: must be absolute");
    const VolumeSource& v = it->second;
    RootMount mount{v.kind, v.host.string(), target, v.access, v.size_bytes};
    if (m.value("readOnly", false)) mount.access = RootMount::Access::kReadOnly;
    if (const std::string sub = m.value("subPath", ""); !sub.empty() && v.kind == RootMount::Kind::kBind)
      mount.source = subpath_folder(v.host, sub).string();
    plan.mounts.push_back(std::move(mount));
  }
}

// A host program's root: the base (system folders, the mapped programs, /dev, /proc, /sys, /tmp, /dev/shm), its
// HOME as an empty folder, then the pod's mounts.
RootPlan host_container_root(const json& pod, const json& c, const Volumes& volumes, const SandboxOptions& options,
                             const fs::path& dir) {
  std::vector<std::string> programs;
  for (const auto& [command, program] : options.commands) programs.push_back(program);
  for (const auto& [image, program] : options.images) programs.push_back(program);
  RootPlan plan{dir / "root" / c.value("name", ""), base_mounts(programs, kDefaultShmBytes), c.value("workingDir", "/"),
                pod_hostname(pod)};
  if (const char* home = std::getenv("HOME"); home != nullptr && fs::path(home).is_absolute())
    plan.mounts.push_back({RootMount::Kind::kDirectory, "", home});
  add_pod_mounts(plan, c, volumes, dir);
  return plan;
}

// What the kubelet adds to every container's environment: the test's settings and the `kubernetes` Service.
void add_kubelet_env(std::map<std::string, std::string>& env, const SandboxOptions& options) {
  for (const auto& [k, v] : options.env) env.emplace(k, v);
  if (!options.service_host.empty()) {
    env.emplace("KUBERNETES_SERVICE_HOST", options.service_host);
    env.emplace("KUBERNETES_SERVICE_PORT", std::to_string(options.service_port));
    env.emplace("KUBERNETES_SERVICE_PORT_HTTPS", std::to_string(options.service_port));
  }
}

std::vector<std::string> strings_of(const json& c, const char* key) {
  std::vector<std::string> out;
  for (const json& a : c.value(key, json::array())) out.push_back(a.get<std::string>());
  return out;
}

ContainerProcess host_process(const json& pod, const json& c, const Volumes& volumes, const SandboxOptions& options,
                              const fs::path& dir) {
  ContainerProcess p{host_container_root(pod, c, volumes, options, dir), {}, container_env(pod, c)};
  for (const std::string& a : container_command(c, options)) p.argv.push_back(expand_references(a, p.env));
  add_kubelet_env(p.env, options);
  return p;
}

std::variant<ContainerProcess, Waiting> image_process(const json& pod, const json& c, const Volumes& volumes,
                                                      const SandboxOptions& options, const fs::path& dir,
                                                      const ImageReady& image) {
  const std::string name = c.value("name", "");
  const ImageConfig& config = image.image.config;
  auto user = container_user(pod, c, config, image.rootfs);
  if (auto* error = std::get_if<ConfigError>(&user)) return Waiting{error->message, "CreateContainerConfigError", name};
  ContainerProcess p;
  p.environment = process::ProcessSpec::Environment::kExact;
  for (const std::string& kv : config.env) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) p.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const auto own = container_env(pod, c);
  for (const auto& [k, v] : own) p.env[k] = v;
  add_kubelet_env(p.env, options);
  const ContainerUser& who = std::get<ContainerUser>(user);
  p.env.emplace("HOME", home_of(who.uid, image.rootfs));
  // Kubernetes' command and args against the image's Entrypoint and Cmd (only the pod's are expanded).
  std::vector<std::string> command = strings_of(c, "command"), args = strings_of(c, "args");
  for (std::string& a : command) a = expand_references(a, own);
  for (std::string& a : args) a = expand_references(a, own);
  if (command.empty()) {
    command = config.entrypoint;
    if (args.empty() && !c.contains("args")) args = config.cmd;
  }
  p.argv = command;
  p.argv.insert(p.argv.end(), args.begin(), args.end());
  if (p.argv.empty()) return Waiting{"no command specified", "CreateContainerError", name};
  const json sc = c.value("securityContext", json::object());
  std::string workdir = c.value("workingDir", config.working_dir);
  p.plan = RootPlan{dir / "root" / name, image_base_mounts(kDefaultShmBytes), workdir.empty() ? "/" : workdir,
                    pod_hostname(pod)};
  add_pod_mounts(p.plan, c, volumes, dir);
  p.plan.image_rootfs = image.rootfs.string();
  p.plan.writable_layer = (dir / "layers" / name).string();
  if (sc.value("readOnlyRootFilesystem", false)) p.plan.root_access = RootMount::Access::kReadOnly;
  p.plan.user = who;
  if (!sc.value("allowPrivilegeEscalation", true)) p.plan.escalation = RootPlan::Escalation::kNoNewPrivileges;
  p.plan.capabilities = container_capabilities(c);
  return p;
}

}  // namespace

std::variant<ContainerProcess, Waiting> container_process(const json& pod, const json& c, const Volumes& volumes,
                                                          const SandboxOptions& options, const fs::path& dir,
                                                          const ImageReady* image) {
  if (image != nullptr) return image_process(pod, c, volumes, options, dir, *image);
  return host_process(pod, c, volumes, options, dir);
}

fs::path termination_log(const fs::path& dir, const json& c) {
  return dir / (c.value("name", "") + ".termination-log");
}

}  // namespace torus::standin
