#include "tests/apiserver/pod_sandbox.h"

#include <fstream>
#include <optional>
#include <regex>

#include "common/util/base64.h"
#include "common/util/error.h"
#include "tests/apiserver/api_error.h"

namespace torus::standin {
namespace fs = std::filesystem;
namespace {

// mountPath -> the folder standing in for it.
using Mounts = std::map<std::string, fs::path>;

std::optional<ObjectPtr> find(const Store& store, const char* resource, const std::string& ns,
                              const std::string& name) {
  try {
    return store.get(*store.registry().find("", "v1", resource), ns, name);
  } catch (const ApiError& e) {
    if (e.code() == 404) return std::nullopt;
    throw;
  }
}

void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw SystemError("process kubelet: cannot write " + path.string());
}

// The files of a ConfigMap or Secret volume: every key, or the listed `items` (key -> path).
void write_keys(const fs::path& dir, const json& source, const std::map<std::string, std::string>& values) {
  if (!source.contains("items")) {
    for (const auto& [key, bytes] : values) write_file(dir / key, bytes);
    return;
  }
  for (const json& item : source["items"]) {
    const std::string key = item.value("key", "");
    auto it = values.find(key);
    if (it != values.end()) write_file(dir / item.value("path", key), it->second);
  }
}

// A ConfigMap's `data` as it is, a Secret's base64 `data` decoded.
enum class Encoding { kPlain, kBase64 };
std::map<std::string, std::string> data_of(const json& object, Encoding encoding) {
  std::map<std::string, std::string> out;
  if (!object.contains("data") || !object["data"].is_object()) return out;
  const json& data = object["data"];
  for (auto it = data.begin(); it != data.end(); ++it) {
    const std::string text = it.value().get<std::string>();
    out[it.key()] = encoding == Encoding::kPlain ? text : base64_decode(text).value_or("");
  }
  return out;
}

// Writes volume `v` under `dir`; a reason to wait when its ConfigMap or Secret does not exist yet.
std::optional<Waiting> write_volume(const Store& store, const std::string& ns, const json& v, const fs::path& dir) {
  const std::string name = v.value("name", "");
  fs::create_directories(dir);
  if (v.contains("configMap")) {
    const std::string cm = v["configMap"].value("name", "");
    auto object = find(store, "configmaps", ns, cm);
    if (!object) return Waiting{"configmap \"" + cm + "\" not found (volume " + name + ")"};
    write_keys(dir, v["configMap"], data_of(**object, Encoding::kPlain));
  } else if (v.contains("secret")) {
    const std::string secret = v["secret"].value("secretName", "");
    auto object = find(store, "secrets", ns, secret);
    if (!object) return Waiting{"secret \"" + secret + "\" not found (volume " + name + ")"};
    write_keys(dir, v["secret"], data_of(**object, Encoding::kBase64));
  } else if (!v.contains("emptyDir")) {
    throw InvalidArgument("spec.volumes[" + name +
                          "]: the process kubelet runs configMap, secret and emptyDir volumes");
  }
  return std::nullopt;
}

// "/etc/torus/job/job.json" -> "<dir>/volumes/torus-job/job.json" when /etc/torus/job is a mount.
std::string map_path(const Mounts& mounts, const std::string& value) {
  const Mounts::value_type* best = nullptr;
  for (const auto& m : mounts) {
    const std::string& path = m.first;
    const bool under = value == path || (value.rfind(path, 0) == 0 && value.size() > path.size() &&
                                         (value[path.size()] == '/' || path.back() == '/'));
    if (under && (best == nullptr || path.size() > best->first.size())) best = &m;
  }
  if (best == nullptr) return value;
  return best->second.string() + value.substr(best->first.size());
}

// The pod IP behind a headless-service DNS name, "" when `value` is no such name; a reason to wait when the pod
// it names has no IP yet.
std::variant<std::string, Waiting> resolve_dns(const Store& store, const std::string& value) {
  static const std::regex kPodName(R"(^([a-z0-9-]+)\.([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.cluster\.local)?\.?$)");
  std::smatch m;
  if (!std::regex_match(value, m, kPodName)) return std::string();
  for (const ObjectPtr& p : store.list(*store.registry().find("", "v1", "pods"), m[3].str()).items) {
    const json& spec = (*p)["spec"];
    if (spec.value("hostname", "") != m[1].str() || spec.value("subdomain", "") != m[2].str()) continue;
    if ((*p)["metadata"].contains("deletionTimestamp")) continue;
    const std::string ip = (*p).value("status", json::object()).value("podIP", "");
    if (!ip.empty()) return ip;
  }
  return Waiting{"DNS name " + value + " does not resolve yet (no running pod with that hostname and subdomain)"};
}

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

// One container's environment; a reason to wait for DNS.
std::variant<std::map<std::string, std::string>, Waiting> container_env(const Store& store, const json& pod,
                                                                        const json& container, const Mounts& mounts) {
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
    const std::string value = map_path(mounts, e.value("value", ""));
    auto resolved = resolve_dns(store, value);
    if (auto* waiting = std::get_if<Waiting>(&resolved)) return *waiting;
    const std::string& ip = std::get<std::string>(resolved);
    env[name] = ip.empty() ? value : ip;
  }
  return env;
}

std::vector<std::string> container_argv(const json& container, const Mounts& mounts, const SandboxOptions& options) {
  std::vector<std::string> argv;
  for (const json& a : container.value("command", json::array()))
    argv.push_back(map_path(mounts, a.get<std::string>()));
  if (argv.empty())
    throw InvalidArgument("spec.containers[" + container.value("name", "") +
                          "].command: required by the process kubelet (it has no image to take an entrypoint from)");
  for (const json& a : container.value("args", json::array())) argv.push_back(map_path(mounts, a.get<std::string>()));
  auto it = options.commands.find(argv[0]);
  if (it != options.commands.end()) argv[0] = it->second;
  return argv;
}

}  // namespace

fs::path pod_dir(const fs::path& root, const json& pod) {
  return root / namespace_of(pod) / (name_of(pod) + "-" + pod["metadata"].value("uid", ""));
}

std::variant<PodLaunch, Waiting> prepare_pod(const Store& store, const json& pod, const SandboxOptions& options) {
  PodLaunch launch;
  launch.dir = pod_dir(options.root, pod);
  fs::create_directories(launch.dir);
  std::map<std::string, fs::path> volume_dirs;
  for (const json& v : pod["spec"].value("volumes", json::array())) {
    const fs::path dir = launch.dir / "volumes" / v.value("name", "");
    if (auto waiting = write_volume(store, namespace_of(pod), v, dir)) return *waiting;
    volume_dirs[v.value("name", "")] = dir;
  }
  for (const json& c : pod["spec"].value("containers", json::array())) {
    Mounts mounts;
    for (const json& m : c.value("volumeMounts", json::array())) {
      auto it = volume_dirs.find(m.value("name", ""));
      if (it == volume_dirs.end())
        throw InvalidArgument("spec.containers[" + c.value("name", "") + "].volumeMounts[" + m.value("name", "") +
                              "]: no such volume");
      mounts[m.value("mountPath", "")] = it->second;
    }
    auto env = container_env(store, pod, c, mounts);
    if (auto* waiting = std::get_if<Waiting>(&env)) return *waiting;
    ContainerLaunch container{c.value("name", ""), container_argv(c, mounts, options),
                              std::get<std::map<std::string, std::string>>(env)};
    for (const auto& [k, v] : options.env) container.env.emplace(k, v);
    launch.containers.push_back(std::move(container));
  }
  return launch;
}

}  // namespace torus::standin
