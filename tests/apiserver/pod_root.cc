#include "tests/apiserver/pod_root.h"

#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "common/util/error.h"

namespace torus::standin {
namespace fs = std::filesystem;
namespace {

using Kind = RootMount::Kind;
using Access = RootMount::Access;

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kBind:
      return "bind";
    case Kind::kTmpfs:
      return "tmpfs";
    case Kind::kSymlink:
      return "symlink";
    case Kind::kDirectory:
      return "directory";
    case Kind::kMirror:
      return "mirror";
    case Kind::kDevpts:
      return "devpts";
  }
  return "";
}

Kind kind_of(const std::string& name) {
  for (Kind k : {Kind::kBind, Kind::kTmpfs, Kind::kSymlink, Kind::kDirectory, Kind::kMirror, Kind::kDevpts}) {
    if (name == kind_name(k)) return k;
  }
  throw InvalidArgument(
      "pod root plan: mounts[].kind: expected bind, tmpfs, symlink, directory, mirror or devpts, got \"" + name + "\"");
}

void check(int rc, const std::string& what) {
  if (rc != 0) throw_errno("pod root: " + what);
}

// A folder, or for a bind of a file an empty file, to mount on.
void make_mount_point(const fs::path& at, bool directory) {
  std::error_code ec;
  if (directory) {
    fs::create_directories(at, ec);
  } else {
    fs::create_directories(at.parent_path(), ec);
    std::ofstream touch(at, std::ios::app);
  }
  if (!fs::exists(at)) throw SystemError("pod root: cannot make mount point " + at.string());
}

void bind_read_only(const std::string& source, const fs::path& at, const std::string& target) {
  make_mount_point(at, fs::is_directory(source));
  check(::mount(source.c_str(), at.c_str(), nullptr, MS_BIND | MS_REC, nullptr), "bind " + source + " at " + target);
  check(::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr),
        "read-only remount of " + target);
}

void mirror(const fs::path& root, const RootMount& m, const fs::path& at) {
  const std::string hidden = "/.host" + m.source;
  bind_read_only(m.source, root / fs::path(hidden).relative_path(), hidden);
  fs::create_directories(at);
  for (const auto& entry : fs::directory_iterator(m.source)) {
    const fs::path name = entry.path().filename();
    // A link keeps its own target (/etc/mtab -> ../proc/self/mounts), anything else points into the bind.
    const fs::path target = entry.is_symlink() ? fs::read_symlink(entry.path()) : fs::path(hidden) / name;
    fs::create_symlink(target, at / name);
  }
}

void apply(const fs::path& root, const RootMount& m) {
  const fs::path at = resolve_in_root(root, m.target);
  // The mirror's link to the host's entry (/etc/hosts -> /.host/etc/hosts) gives way to what the pod mounts there;
  // following it would reach the host's tree, outside the new root.
  if (std::error_code ec; m.kind != Kind::kMirror && fs::is_symlink(fs::symlink_status(at, ec))) fs::remove(at);
  switch (m.kind) {
    case Kind::kMirror:
      return mirror(root, m, at);
    case Kind::kSymlink:
      fs::create_directories(at.parent_path());
      // An image's own file there (its /etc/hosts) gives way, as a runtime's bind over it would.
      if (std::error_code ec; fs::exists(fs::symlink_status(at, ec)) && !fs::is_directory(at)) fs::remove(at);
      fs::create_symlink(m.source, at);
      return;
    case Kind::kDirectory:
      fs::create_directories(at);
      return;
    case Kind::kTmpfs: {
      make_mount_point(at, true);
      std::string options = "mode=1777";
      if (m.size_bytes > 0) options += ",size=" + std::to_string(m.size_bytes);
      check(::mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()), "tmpfs at " + m.target);
      break;
    }
    case Kind::kDevpts:
      make_mount_point(at, true);
      check(::mount("devpts", at.c_str(), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"),
            "devpts at " + m.target);
      break;
    case Kind::kBind:
      make_mount_point(at, fs::is_directory(m.source));
      check(::mount(m.source.c_str(), at.c_str(), nullptr, MS_BIND | MS_REC, nullptr),
            "bind " + m.source + " at " + m.target);
      break;
  }
  if (m.access == Access::kReadOnly) {
    check(::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr),
          "read-only remount of " + m.target);
  }
}

}  // namespace

fs::path resolve_in_root(const fs::path& root, const fs::path& target) {
  fs::path at = root;
  std::vector<fs::path> todo;
  for (const auto& part : target.relative_path()) todo.insert(todo.begin(), part);
  int links = 0;
  while (!todo.empty()) {
    const fs::path part = todo.back();
    todo.pop_back();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (at != root) at = at.parent_path();
      continue;
    }
    const fs::path next = at / part;
    std::error_code ec;
    if (todo.empty() || !fs::is_symlink(fs::symlink_status(next, ec))) {
      at = next;
      continue;
    }
    if (++links > 40) throw InvalidArgument("pod root: too many links resolving " + target.string());
    const fs::path link = fs::read_symlink(next);
    if (link.is_absolute()) at = root;
    const fs::path relative = link.relative_path();
    std::vector<fs::path> parts(relative.begin(), relative.end());
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
  }
  return at;
}

nlohmann::json to_json(const RootPlan& plan) {
  nlohmann::json mounts = nlohmann::json::array();
  for (const RootMount& m : plan.mounts) {
    mounts.push_back({{"kind", kind_name(m.kind)},
                      {"source", m.source},
                      {"target", m.target},
                      {"readOnly", m.access == Access::kReadOnly},
                      {"sizeBytes", m.size_bytes}});
  }
  nlohmann::json doc = {
      {"root", plan.root.string()}, {"workingDir", plan.working_dir}, {"hostname", plan.hostname}, {"mounts", mounts}};
  if (!plan.image_rootfs.empty()) {
    doc["image"] = {{"rootfs", plan.image_rootfs},
                    {"writableLayer", plan.writable_layer},
                    {"readOnly", plan.root_access == Access::kReadOnly}};
  }
  if (plan.user) doc["user"] = {{"uid", plan.user->uid}, {"gid", plan.user->gid}, {"groups", plan.user->groups}};
  doc["noNewPrivileges"] = plan.escalation == RootPlan::Escalation::kNoNewPrivileges;
  if (plan.capabilities) doc["capabilities"] = *plan.capabilities;
  return doc;
}

RootPlan root_plan_from_json(const nlohmann::json& doc) {
  RootPlan plan;
  try {
    plan.root = doc.at("root").get<std::string>();
    plan.working_dir = doc.value("workingDir", "/");
    plan.hostname = doc.value("hostname", "");
    for (const auto& m : doc.at("mounts")) {
      RootMount mount;
      mount.kind = kind_of(m.at("kind").get<std::string>());
      mount.source = m.value("source", "");
      mount.target = m.at("target").get<std::string>();
      mount.access = m.value("readOnly", false) ? Access::kReadOnly : Access::kReadWrite;
      mount.size_bytes = m.value("sizeBytes", uint64_t{0});
      if (!fs::path(mount.target).is_absolute())
        throw InvalidArgument("pod root plan: mounts[].target: must be absolute, got \"" + mount.target + "\"");
      plan.mounts.push_back(std::move(mount));
    }
    if (doc.contains("image")) {
      const auto& image = doc.at("image");
      plan.image_rootfs = image.at("rootfs").get<std::string>();
      plan.writable_layer = image.at("writableLayer").get<std::string>();
      plan.root_access = image.value("readOnly", false) ? Access::kReadOnly : Access::kReadWrite;
    }
    if (doc.contains("user")) {
      const auto& u = doc.at("user");
      plan.user = ContainerUser{u.at("uid").get<uint32_t>(), u.at("gid").get<uint32_t>(),
                                u.value("groups", std::vector<uint32_t>{})};
    }
    if (doc.value("noNewPrivileges", false)) plan.escalation = RootPlan::Escalation::kNoNewPrivileges;
    if (doc.contains("capabilities")) plan.capabilities = doc.at("capabilities").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("pod root plan: ") + e.what());
  }
  return plan;
}

namespace {

// The host devices a container gets: runc's defaults, and NVIDIA's devices as the NVIDIA runtime adds them.
std::vector<fs::path> container_devices() {
  std::vector<fs::path> out;
  for (const char* name : {"null", "zero", "full", "random", "urandom", "tty"}) {
    if (std::error_code ec; fs::exists(fs::path("/dev") / name, ec)) out.push_back(fs::path("/dev") / name);
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec)) {
    if (entry.path().filename().string().rfind("nvidia", 0) == 0) out.push_back(entry.path());
  }
  return out;
}

const std::pair<const char*, const char*> kDevLinks[] = {{"/dev/fd", "/proc/self/fd"},
                                                         {"/dev/stdin", "/proc/self/fd/0"},
                                                         {"/dev/stdout", "/proc/self/fd/1"},
                                                         {"/dev/stderr", "/proc/self/fd/2"},
                                                         {"/dev/ptmx", "pts/ptmx"}};

}  // namespace

std::vector<RootMount> image_base_mounts(uint64_t shm_bytes) {
  std::vector<RootMount> out;
  // /dev as a container runtime makes it (runc's default devices): a tmpfs holding the harmless character devices,
  // the GPUs' when the host has them, and the usual links; not the host's disks, consoles or /dev/termination-log.
  out.push_back({Kind::kTmpfs, "", "/dev"});
  for (const fs::path& device : container_devices()) out.push_back({Kind::kBind, device.string(), device.string()});
  out.push_back({Kind::kDevpts, "", "/dev/pts"});
  for (const auto& [link, target] : kDevLinks) out.push_back({Kind::kSymlink, target, link});
  out.push_back({Kind::kBind, "/proc", "/proc"});
  out.push_back({Kind::kBind, "/sys", "/sys", Access::kReadOnly});
  out.push_back({Kind::kTmpfs, "", "/dev/shm", Access::kReadWrite, shm_bytes});
  return out;
}

std::vector<RootMount> base_mounts(const std::vector<std::string>& programs, uint64_t shm_bytes) {
  std::vector<RootMount> out;
  static const char* kSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"};
  // Where pods mount volumes of their own (/etc/torus/job): folders of links, not binds.
  static const std::string kMirrored[] = {"/etc", "/opt"};
  // Merged-/usr systems have /bin -> usr/bin: the link, not a second bind.
  for (const char* dir : kSystem) {
    std::error_code ec;
    const auto status = fs::symlink_status(dir, ec);
    if (ec || !fs::exists(status)) continue;
    if (fs::is_symlink(status)) {
      out.push_back({Kind::kSymlink, fs::read_symlink(dir).string(), dir});
    } else if (std::find(std::begin(kMirrored), std::end(kMirrored), dir) != std::end(kMirrored)) {
      out.push_back({Kind::kMirror, dir, dir});
    } else {
      out.push_back({Kind::kBind, dir, dir, Access::kReadOnly});
    }
  }
  for (RootMount& m : image_base_mounts(shm_bytes)) out.push_back(std::move(m));
  out.push_back({Kind::kTmpfs, "", "/tmp"});
  // After /tmp: a program kept under /tmp (a test's own) stays reachable on top of the private /tmp.
  for (const std::string& program : programs) {
    const std::string dir = fs::path(program).parent_path().string();
    const bool system = std::any_of(std::begin(kSystem), std::end(kSystem),
                                    [&](const char* s) { return dir == s || dir.starts_with(std::string(s) + "/"); });
    if (fs::path(program).is_absolute() && !system) out.push_back({Kind::kBind, dir, dir, Access::kReadOnly});
  }
  return out;
}

void enter_root(const RootPlan& plan) {
  check(::unshare(CLONE_NEWNS | (plan.hostname.empty() ? 0 : CLONE_NEWUTS)), "unshare(CLONE_NEWNS)");
  if (!plan.hostname.empty())
    check(::sethostname(plan.hostname.data(), plan.hostname.size()), "sethostname " + plan.hostname);
  // Nothing mounted from here on reaches the host, and nothing the host mounts later reaches us.
  check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), "making / private");
  fs::create_directories(plan.root);
  if (plan.image_rootfs.empty()) {
    check(::mount("tmpfs", plan.root.c_str(), "tmpfs", MS_NOSUID, "mode=0755"), "tmpfs root at " + plan.root.string());
  } else {
    const fs::path layer = plan.writable_layer;
    fs::remove_all(layer);  // each run of the container starts from its image again
    fs::create_directories(layer / "upper");
    fs::create_directories(layer / "work");
    const std::string options = "lowerdir=" + plan.image_rootfs + ",upperdir=" + (layer / "upper").string() +
                                ",workdir=" + (layer / "work").string();
    check(::mount("overlay", plan.root.c_str(), "overlay", 0, options.c_str()), "overlay root (" + options + ")");
  }
  for (const RootMount& m : plan.mounts) apply(plan.root, m);
  // A working folder the image lacks is made, as runc makes the process's cwd.
  if (!plan.image_rootfs.empty()) fs::create_directories(plan.root / fs::path(plan.working_dir).relative_path());
  // After the mount points are made in it; what is mounted under it keeps its own access.
  if (plan.root_access == Access::kReadOnly) {
    check(::mount(nullptr, plan.root.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr),
          "read-only remount of the root");
  }
  check(::chdir(plan.root.c_str()), "chdir " + plan.root.string());
  // runc's pivot_root(".", "."): the host's root ends up stacked over the new one and is detached at once, with no
  // folder to put it in (a read-only root has no room for one).
  check(static_cast<int>(::syscall(SYS_pivot_root, ".", ".")), "pivot_root");
  check(::umount2(".", MNT_DETACH), "detaching the host's root");
  check(::chdir("/"), "chdir /");
  check(::chdir(plan.working_dir.c_str()), "chdir " + plan.working_dir);
}

namespace {

// Linux's capability numbers (linux/capability.h), by the names a pod's securityContext uses.
constexpr const char* kCapabilityNames[] = {"CHOWN",
                                            "DAC_OVERRIDE",
                                            "DAC_READ_SEARCH",
                                            "FOWNER",
                                            "FSETID",
                                            "KILL",
                                            "SETGID",
                                            "SETUID",
                                            "SETPCAP",
                                            "LINUX_IMMUTABLE",
                                            "NET_BIND_SERVICE",
                                            "NET_BROADCAST",
                                            "NET_ADMIN",
                                            "NET_RAW",
                                            "IPC_LOCK",
                                            "IPC_OWNER",
                                            "SYS_MODULE",
                                            "SYS_RAWIO",
                                            "SYS_CHROOT",
                                            "SYS_PTRACE",
                                            "SYS_PACCT",
                                            "SYS_ADMIN",
                                            "SYS_BOOT",
                                            "SYS_NICE",
                                            "SYS_RESOURCE",
                                            "SYS_TIME",
                                            "SYS_TTY_CONFIG",
                                            "MKNOD",
                                            "LEASE",
                                            "AUDIT_WRITE",
                                            "AUDIT_CONTROL",
                                            "SETFCAP",
                                            "MAC_OVERRIDE",
                                            "MAC_ADMIN",
                                            "SYSLOG",
                                            "WAKE_ALARM",
                                            "BLOCK_SUSPEND",
                                            "AUDIT_READ",
                                            "PERFMON",
                                            "BPF",
                                            "CHECKPOINT_RESTORE"};

int capability_number(const std::string& name) {
  const std::string bare = name.rfind("CAP_", 0) == 0 ? name.substr(4) : name;
  for (size_t i = 0; i < std::size(kCapabilityNames); ++i) {
    if (bare == kCapabilityNames[i]) return static_cast<int>(i);
  }
  throw InvalidArgument("capabilities: unknown capability \"" + name + "\"");
}

}  // namespace

const std::vector<std::string>& default_capabilities() {
  static const std::vector<std::string> caps = {
      "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
      "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
      "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
      "CAP_KILL",    "CAP_AUDIT_WRITE"};
  return caps;
}

void become_user(const RootPlan& plan) {
  if (plan.escalation == RootPlan::Escalation::kNoNewPrivileges) {
    check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)");
  }
  uint64_t kept = 0;
  if (plan.capabilities) {
    for (const std::string& name : *plan.capabilities) kept |= uint64_t{1} << capability_number(name);
    for (int cap = 0; ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap) {
      if (!(kept >> cap & 1)) check(::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "prctl(PR_CAPBSET_DROP)");
    }
  }
  if (plan.user) {
    const std::vector<gid_t> groups(plan.user->groups.begin(), plan.user->groups.end());
    check(::setgroups(groups.size(), groups.data()), "setgroups");
    check(::setgid(plan.user->gid), "setgid " + std::to_string(plan.user->gid));
    // A non-root uid loses every capability here (no SECBIT_KEEP_CAPS), as in a runtime's container.
    check(::setuid(plan.user->uid), "setuid " + std::to_string(plan.user->uid));
  }
  if (plan.capabilities && (!plan.user || plan.user->uid == 0)) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    for (int i = 0; i < 2; ++i) {
      data[i].effective = data[i].permitted = data[i].inheritable = static_cast<uint32_t>(kept >> (32 * i));
    }
    check(static_cast<int>(::syscall(SYS_capset, &header, data)), "capset");
  }
}

uint64_t parse_quantity(const std::string& text, const std::string& field) {
  static const std::pair<const char*, uint64_t> kSuffixes[] = {{"Ki", 1ull << 10},
                                                               {"Mi", 1ull << 20},
                                                               {"Gi", 1ull << 30},
                                                               {"Ti", 1ull << 40},
                                                               {"k", 1000},
                                                               {"M", 1000000},
                                                               {"G", 1000000000},
                                                               {"T", 1000000000000ull},
                                                               {"", 1}};
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used > 0 && value >= 0) {
    const std::string suffix = text.substr(used);
    for (const auto& [name, scale] : kSuffixes) {
      if (suffix == name) return static_cast<uint64_t>(value * static_cast<double>(scale));
    }
  }
  throw InvalidArgument(field + ": expected a quantity such as 64Mi or 1Gi, got \"" + text + "\"");
}

}  // namespace torus::standin
