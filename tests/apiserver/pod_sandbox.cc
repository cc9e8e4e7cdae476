#include "tests/apiserver/pod_sandbox.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>

#include "common/util/base64.h"
#include "common/util/error.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/pod_root.h"
#include "tests/apiserver/runtime/container_launch.h"
#include "tests/apiserver/runtime/container_security.h"

namespace torus::standin {
namespace fs = std::filesystem;
namespace {

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

fs::path shared_folder(const fs::path& base, const std::string& path) {
  const fs::path dir = base / fs::path(path).relative_path();
  fs::create_directories(dir);
  return dir;
}

VolumeSource files_volume(const fs::path& dir, const json& source, const std::map<std::string, std::string>& data) {
  fs::create_directories(dir);
  write_keys(dir, source, data);
  return VolumeSource{RootMount::Kind::kBind, dir, 0, RootMount::Access::kReadOnly};
}

VolumeSource empty_dir(const json& e, const fs::path& dir, const std::string& name) {
  if (e.value("medium", "") == "Memory") {
    const std::string limit = e.value("sizeLimit", "");
    const std::string field = "spec.volumes[" + name + "].emptyDir.sizeLimit";
    return VolumeSource{RootMount::Kind::kTmpfs, {}, limit.empty() ? 0 : parse_quantity(limit, field)};
  }
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::all);  // the kubelet makes an emptyDir 0777: any container user may write it
  return VolumeSource{RootMount::Kind::kBind, dir};
}

// A projected volume's files (the service-account token, CA and namespace of kube-api-access-*), or a reason to
// wait for a ConfigMap or Secret it names.
std::variant<VolumeSource, Waiting> projected_volume(const Store& store, const json& pod, const json& v,
                                                     const SandboxOptions& options, const fs::path& dir) {
  const std::string ns = namespace_of(pod);
  const std::string name = v.value("name", "");
  std::map<std::string, std::string> files;
  for (const json& source : v["projected"].value("sources", json::array())) {
    if (source.contains("serviceAccountToken")) {
      const std::string account = pod["spec"].value("serviceAccountName", "default");
      if (options.mint_token)
        files[source["serviceAccountToken"].value("path", "token")] = options.mint_token(ns, account);
    } else if (source.contains("configMap") || source.contains("secret")) {
      const bool is_map = source.contains("configMap");
      const json& ref = is_map ? source["configMap"] : source["secret"];
      const std::string object_name = ref.value("name", "");
      auto object = find(store, is_map ? "configmaps" : "secrets", ns, object_name);
      if (!object) {
        if (ref.value("optional", false)) continue;
        return Waiting{std::string(is_map ? "configmap" : "secret") + " \"" + object_name + "\" not found (volume " +
                       name + ")"};
      }
      const std::map<std::string, std::string> data = data_of(**object, is_map ? Encoding::kPlain : Encoding::kBase64);
      if (!ref.contains("items")) files.insert(data.begin(), data.end());
      for (const json& item : ref.value("items", json::array())) {
        auto it = data.find(item.value("key", ""));
        if (it != data.end()) files[item.value("path", it->first)] = it->second;
      }
    } else if (source.contains("downwardAPI")) {
      for (const json& item : source["downwardAPI"].value("items", json::array())) {
        const std::string where =
            "spec.volumes[" + name + "].projected.downwardAPI.items[" + item.value("path", "") + "]";
        if (!item.contains("fieldRef")) throw InvalidArgument(where + ": the process kubelet serves fieldRef only");
        files[item.value("path", "")] = field_value(pod, item["fieldRef"].value("fieldPath", ""), where);
      }
    } else {
      throw InvalidArgument("spec.volumes[" + name +
                            "].projected.sources: the process kubelet projects serviceAccountToken, configMap, secret "
                            "and downwardAPI");
    }
  }
  fs::create_directories(dir);
  for (const auto& [path, bytes] : files) write_file(dir / path, bytes);
  return VolumeSource{RootMount::Kind::kBind, dir, 0, RootMount::Access::kReadOnly};
}

// Volume `v` of the pod: its files written or its folder made, or a reason to wait (a ConfigMap, Secret or claim
// that does not exist yet).
std::variant<VolumeSource, Waiting> prepare_volume(const Store& store, const json& pod, const json& v,
                                                   const SandboxOptions& options, const fs::path& pod_folder) {
  const std::string ns = namespace_of(pod);
  const std::string name = v.value("name", "");
  const fs::path own = pod_folder / "volumes" / name;
  if (v.contains("configMap")) {
    const std::string cm = v["configMap"].value("name", "");
    auto object = find(store, "configmaps", ns, cm);
    if (!object) return Waiting{"configmap \"" + cm + "\" not found (volume " + name + ")"};
    return files_volume(own, v["configMap"], data_of(**object, Encoding::kPlain));
  }
  if (v.contains("secret")) {
    const std::string secret = v["secret"].value("secretName", "");
    auto object = find(store, "secrets", ns, secret);
    if (!object) return Waiting{"secret \"" + secret + "\" not found (volume " + name + ")"};
    return files_volume(own, v["secret"], data_of(**object, Encoding::kBase64));
  }
  if (v.contains("projected")) return projected_volume(store, pod, v, options, own);
  if (v.contains("emptyDir")) return empty_dir(v["emptyDir"], own, name);
  if (v.contains("hostPath")) {
    const fs::path node = options.root / "_nodes" / pod["spec"].value("nodeName", "");
    return VolumeSource{RootMount::Kind::kBind, shared_folder(node, v["hostPath"].value("path", ""))};
  }
  if (v.contains("persistentVolumeClaim")) {
    const json& c = v["persistentVolumeClaim"];
    const std::string claim = c.value("claimName", "");
    auto object = find(store, "persistentvolumeclaims", ns, claim);
    if (!object) return Waiting{"persistentvolumeclaim \"" + claim + "\" not found (volume " + name + ")"};
    // One folder per claim object: a claim made again under the same name is a new, empty volume.
    const std::string folder = claim + "-" + (**object)["metadata"].value("uid", "");
    return VolumeSource{RootMount::Kind::kBind, shared_folder(options.root / "_claims" / ns, folder), 0,
                        c.value("readOnly", false) ? RootMount::Access::kReadOnly : RootMount::Access::kReadWrite};
  }
  if (v.contains("nfs")) {
    const fs::path server = options.root / "_nfs" / v["nfs"].value("server", "");
    return VolumeSource{RootMount::Kind::kBind, shared_folder(server, v["nfs"].value("path", "/"))};
  }
  throw InvalidArgument("spec.volumes[" + name +
                        "]: the process kubelet runs configMap, secret, projected, emptyDir, hostPath, "
                        "persistentVolumeClaim and nfs volumes");
}

// The volume types whose plugins manage ownership (fsGroup): hostPath and nfs are left as they are.
bool owns_its_files(const json& v) {
  for (const char* kind : {"emptyDir", "configMap", "secret", "projected", "persistentVolumeClaim"}) {
    if (v.contains(kind)) return true;
  }
  return false;
}

}  // namespace

fs::path pod_dir(const fs::path& root, const json& pod) {
  return root / namespace_of(pod) / (name_of(pod) + "-" + pod["metadata"].value("uid", ""));
}

std::string termination_message(const ContainerLaunch& c, const fs::path& log, int exit_code) {
  constexpr size_t kFileBytes = 4096, kLogBytes = 2048, kLogLines = 80;
  std::ifstream in(c.termination_log, std::ios::binary);
  std::string message(kFileBytes, '\0');
  in.read(message.data(), static_cast<std::streamsize>(message.size()));
  message.resize(static_cast<size_t>(in.gcount()));
  if (!message.empty() || exit_code == 0 || c.message_policy != ContainerLaunch::MessagePolicy::kFallbackToLogsOnError)
    return message;
  // Only the tail is read: a worker's log can be large.
  std::ifstream out(log, std::ios::binary | std::ios::ate);
  const std::streamoff size = out ? static_cast<std::streamoff>(out.tellg()) : 0;
  out.seekg(std::max<std::streamoff>(size - static_cast<std::streamoff>(kLogBytes), 0));
  std::string text((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  size_t start = 0;
  size_t lines = 0;
  for (size_t i = text.size(); i > start; --i) {
    if (text[i - 1] == '\n' && i != text.size() && ++lines == kLogLines) {
      start = i;
      break;
    }
  }
  return text.substr(start);
}

fs::path dns_folder(const fs::path& dir) { return dir / "dns"; }

void write_pod_hosts(const fs::path& dir, const std::string& hosts) {
  // Written aside and renamed: a container resolving at that moment reads the old file or the new, never half.
  const fs::path file = dns_folder(dir) / "hosts";
  write_file(file.string() + ".new", hosts);
  fs::rename(file.string() + ".new", file);
}

void write_pod_dns(const std::vector<DnsRecord>& records, const json& pod, const fs::path& dir) {
  const fs::path folder = dns_folder(dir);
  // No nameserver answers: every cluster name is in the hosts file, and nothing outside is reachable.
  write_file(folder / "resolv.conf", "search " + namespace_of(pod) +
                                         ".svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\n"
                                         "options ndots:5 attempts:1 timeout:1\n");
  write_file(folder / "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n");
  write_file(folder / "hostname", pod_hostname(pod) + "\n");
  write_pod_hosts(dir, hosts_file(records, pod));
}

std::variant<PodLaunch, Waiting> prepare_pod(const Store& store, const json& pod, const SandboxOptions& options,
                                             const PodImages& images) {
  PodLaunch launch;
  launch.dir = pod_dir(options.root, pod);
  fs::create_directories(launch.dir);
  Volumes volumes;
  for (const json& v : pod["spec"].value("volumes", json::array())) {
    auto prepared = prepare_volume(store, pod, v, options, launch.dir);
    if (auto* waiting = std::get_if<Waiting>(&prepared)) return *waiting;
    const VolumeSource& source = std::get<VolumeSource>(prepared);
    if (owns_its_files(v) && source.kind == RootMount::Kind::kBind) {
      apply_fs_group(
          pod, source.host,
          source.access == RootMount::Access::kReadOnly ? VolumeAccess::kReadOnly : VolumeAccess::kReadWrite);
    }
    volumes[v.value("name", "")] = source;
  }
  write_pod_dns(cluster_dns_records(store), pod, launch.dir);
  for (const json& c : pod["spec"].value("containers", json::array())) {
    const std::string name = c.value("name", "");
    const auto image = images.find(name);
    auto made =
        container_process(pod, c, volumes, options, launch.dir, image == images.end() ? nullptr : &image->second);
    if (auto* waiting = std::get_if<Waiting>(&made)) return *waiting;
    ContainerProcess& process = std::get<ContainerProcess>(made);
    const fs::path plan_file = launch.dir / (name + ".root.json");
    write_file(plan_file, to_json(process.plan).dump(2));
    std::vector<std::string> argv = {options.exec_helper, plan_file.string(), "--"};
    argv.insert(argv.end(), process.argv.begin(), process.argv.end());
    const fs::path message_file = termination_log(launch.dir, c);
    write_file(message_file, "");
    // Writable by whichever user the container runs as, as the kubelet makes it.
    fs::permissions(message_file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                      fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
    const auto policy = c.value("terminationMessagePolicy", "File") == "FallbackToLogsOnError"
                            ? ContainerLaunch::MessagePolicy::kFallbackToLogsOnError
                            : ContainerLaunch::MessagePolicy::kFile;
    launch.containers.push_back(
        ContainerLaunch{name, message_file, policy, std::move(argv), std::move(process.env), process.environment});
  }
  return launch;
}

}  // namespace torus::standin
