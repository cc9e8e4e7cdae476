#include "tests/apiserver/runtime/container_security.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/util/error.h"

namespace torus::standin {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The fields of a colon-separated database line (/etc/passwd, /etc/group).
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ':');) out.push_back(f);
  return out;
}

// The image's /etc/passwd or /etc/group, line by line (empty when the image has none).
std::vector<std::vector<std::string>> database(const fs::path& rootfs, const char* name) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(rootfs / "etc" / name);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') rows.push_back(fields(line));
  }
  return rows;
}

std::optional<uint32_t> number(const std::string& text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), ::isdigit)) return std::nullopt;
  return static_cast<uint32_t>(std::stoul(text));
}

std::optional<int64_t> setting(const json& container, const json& pod, const char* key) {
  for (const json* sc : {&container, &pod}) {
    if (sc->is_object() && sc->contains(key) && (*sc)[key].is_number_integer()) return (*sc)[key].get<int64_t>();
  }
  return std::nullopt;
}

bool flag(const json& container, const json& pod, const char* key) {
  for (const json* sc : {&container, &pod}) {
    if (sc->is_object() && sc->contains(key) && (*sc)[key].is_boolean()) return (*sc)[key].get<bool>();
  }
  return false;
}

json security_context(const json& object) {
  const json& spec = object.contains("spec") ? object["spec"] : object;
  return spec.value("securityContext", json::object());
}

void check(int rc, const std::string& what) {
  if (rc != 0) throw_errno("fsGroup: " + what);
}

}  // namespace

std::variant<ContainerUser, ConfigError> container_user(const json& pod, const json& container,
                                                        const ImageConfig& image, const fs::path& rootfs) {
  const json pod_sc = security_context(pod);
  const json c_sc = container.value("securityContext", json::object());
  const std::string pod_name = pod["metadata"].value("name", "") + "_" + pod["metadata"].value("namespace", "") + "(" +
                               pod["metadata"].value("uid", "") + ")";
  const std::string where = "(pod: \"" + pod_name + "\", container: " + container.value("name", "") + ")";
  const std::string user_part = image.user.substr(0, image.user.find(':'));
  const std::string group_part =
      image.user.find(':') == std::string::npos ? "" : image.user.substr(image.user.find(':') + 1);
  const auto passwd = database(rootfs, "passwd");
  const auto groups_db = database(rootfs, "group");

  // kuberuntime's verifyRunAsNonRoot, before anything is looked up.
  const auto run_as_user = setting(c_sc, pod_sc, "runAsUser");
  if (flag(c_sc, pod_sc, "runAsNonRoot")) {
    if (run_as_user) {
      if (*run_as_user == 0) return ConfigError{"container's runAsUser breaks non-root policy " + where};
    } else if (user_part.empty() || number(user_part) == uint32_t{0}) {
      return ConfigError{"container has runAsNonRoot and image will run as root " + where};
    } else if (!number(user_part)) {
      return ConfigError{"container has runAsNonRoot and image has non-numeric user (" + user_part +
                         "), cannot verify user is non-root " + where};
    }
  }
  ContainerUser user;
  std::optional<uint32_t> passwd_gid;
  std::string user_name;
  const auto entry_of = [&](const std::function<bool(const std::vector<std::string>&)>& match) {
    for (const auto& row : passwd) {
      if (row.size() >= 4 && match(row)) return std::optional<std::vector<std::string>>(row);
    }
    return std::optional<std::vector<std::string>>();
  };
  if (run_as_user) {
    user.uid = static_cast<uint32_t>(*run_as_user);
  } else if (const auto uid = number(user_part)) {
    user.uid = *uid;
  } else if (!user_part.empty()) {
    const auto row = entry_of([&](const auto& r) { return r[0] == user_part; });
    if (!row) return ConfigError{"unable to find user " + user_part + ": no matching entries in passwd file"};
    user.uid = static_cast<uint32_t>(std::stoul((*row)[2]));
  }
  if (const auto row = entry_of([&](const auto& r) { return number(r[2]) == user.uid; })) {
    passwd_gid = number((*row)[3]);
    user_name = (*row)[0];
  }
  if (const auto run_as_group = setting(c_sc, pod_sc, "runAsGroup")) {
    user.gid = static_cast<uint32_t>(*run_as_group);
  } else if (const auto gid = number(group_part)) {
    user.gid = *gid;
  } else if (!group_part.empty()) {
    bool found = false;
    for (const auto& row : groups_db) {
      if (row.size() >= 3 && row[0] == group_part) {
        user.gid = static_cast<uint32_t>(std::stoul(row[2]));
        found = true;
      }
    }
    if (!found) return ConfigError{"unable to find group " + group_part + ": no matching entries in group file"};
  } else {
    user.gid = passwd_gid.value_or(0);
  }
  for (const json& g : pod_sc.value("supplementalGroups", json::array())) user.groups.push_back(g.get<uint32_t>());
  if (pod_sc.contains("fsGroup")) user.groups.push_back(pod_sc["fsGroup"].get<uint32_t>());
  if (!user_name.empty() && pod_sc.value("supplementalGroupsPolicy", "Merge") == "Merge") {
    for (const auto& row : groups_db) {
      if (row.size() < 4) continue;
      std::stringstream in(row[3]);
      for (std::string m; std::getline(in, m, ',');) {
        if (m == user_name) user.groups.push_back(static_cast<uint32_t>(std::stoul(row[2])));
      }
    }
  }
  std::sort(user.groups.begin(), user.groups.end());
  user.groups.erase(std::unique(user.groups.begin(), user.groups.end()), user.groups.end());
  return user;
}

std::string home_of(uint32_t uid, const fs::path& rootfs) {
  for (const auto& row : database(rootfs, "passwd")) {
    if (row.size() >= 6 && number(row[2]) == uid && !row[5].empty()) return row[5];
  }
  return "/";
}

std::vector<std::string> container_capabilities(const json& container) {
  const json caps = container.value("securityContext", json::object()).value("capabilities", json::object());
  const auto named = [](std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    return name.rfind("CAP_", 0) == 0 ? name : "CAP_" + name;
  };
  std::vector<std::string> out = default_capabilities();
  for (const json& d : caps.value("drop", json::array())) {
    const std::string name = named(d.get<std::string>());
    if (name == "CAP_ALL") out.clear();
    std::erase(out, name);
  }
  for (const json& a : caps.value("add", json::array())) {
    const std::string name = named(a.get<std::string>());
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

void apply_fs_group(const json& pod, const fs::path& dir, VolumeAccess access) {
  const json sc = security_context(pod);
  if (!sc.contains("fsGroup") || !sc["fsGroup"].is_number_integer()) return;
  const auto gid = sc["fsGroup"].get<gid_t>();
  // pkg/volume/volume_linux.go: rw 0660 (read-only 0440), folders also 0110 and setgid.
  const mode_t file_mask = access == VolumeAccess::kReadOnly ? 0440 : 0660;
  const mode_t dir_mask = file_mask | 0110 | S_ISGID;
  struct stat root {};
  check(::stat(dir.c_str(), &root), "stat " + dir.string());
  if (sc.value("fsGroupChangePolicy", "Always") == "OnRootMismatch" && root.st_gid == gid &&
      (root.st_mode & dir_mask) == dir_mask) {
    return;
  }
  const auto own = [&](const fs::path& path) {
    struct stat st {};
    check(::lstat(path.c_str(), &st), "stat " + path.string());
    if (S_ISLNK(st.st_mode)) return;
    check(::lchown(path.c_str(), static_cast<uid_t>(-1), gid), "chown " + path.string());
    const mode_t mask = S_ISDIR(st.st_mode) ? dir_mask : file_mask;
    check(::chmod(path.c_str(), (st.st_mode & 07777) | mask), "chmod " + path.string());
  };
  own(dir);
  for (const auto& entry : fs::recursive_directory_iterator(dir)) own(entry.path());
}

}  // namespace torus::standin
