#pragma once
// The filesystem a container of the process kubelet sees, as a container runtime would give it: a private mount
// namespace whose root is a fresh tmpfs (writes outside the pod's volumes are private and lost with the container),
// holding only
//   - the host's system folders (/usr, /lib...; /etc and /opt as folders of links) and the programs the stand-in maps
//     commands to, read-only;
//   - a /dev of its own with the devices a runtime gives (null, zero, full, random, urandom, tty, pts, NVIDIA's),
//     /proc and /sys of the host (process info), a private tmpfs at /dev/shm and at /tmp;
//   - the pod's volumes at their mountPaths (bind mounts of host folders, or a sized tmpfs for medium Memory);
// and its own host name (a UTS namespace: gethostname() is the pod's, as in a cluster).
// The stand-in writes a RootPlan per container (pod_sandbox.cc); `standin-pod-exec PLAN -- PROGRAM ARGS...`
// (pod_exec_main.cc) enters it and execs the program, keeping its pid (so signals and pid files still name it).
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace torus::standin {

struct RootMount {
  // kMirror: a folder of the root whose entries are links into the host's folder `source` (bound read-only at
  // /.host<source>), so volumes can be mounted under it (/etc/torus/job) without touching the host's.
  // kDevpts: a devpts instance of the container's own (its terminals only, not the host's), as a runtime mounts it.
  enum class Kind { kBind, kTmpfs, kSymlink, kDirectory, kMirror, kDevpts };
  enum class Access { kReadWrite, kReadOnly };
  Kind kind = Kind::kBind;
  std::string source;  // kBind: the host path; kSymlink: the link's target; else unused
  std::string target;  // absolute, inside the container
  Access access = Access::kReadWrite;
  uint64_t size_bytes = 0;  // kTmpfs; 0: the kernel's default (half the memory)
};

// Who the container's process is (runc's process.user): set after the root is entered, before the exec.
struct ContainerUser {
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;  // supplementary: the pod's supplementalGroups and fsGroup, the image's /etc/group
};

struct RootPlan {
  std::filesystem::path root;     // an empty host folder the new root is mounted on (inside the namespace only)
  std::vector<RootMount> mounts;  // applied in order: parents before what is mounted under them
  std::string working_dir = "/";
  std::string hostname;  // the pod's (spec.hostname, else its name); empty: the host's
  // From an image (what a container runtime does): the root is an overlay of `image_rootfs` (the node's unpacked
  // image, never written) and `writable_layer`'s upper/ and work/ (the container's own changes, new for each run);
  // kReadOnly (readOnlyRootFilesystem) remounts it read-only once the mounts are made. Empty: a tmpfs root with
  // the host's system folders (base_mounts).
  std::string image_rootfs;
  std::string writable_layer;
  RootMount::Access root_access = RootMount::Access::kReadWrite;
  // Set: the process becomes this user (setgroups, setgid, setuid); unset: it stays root.
  std::optional<ContainerUser> user;
  // allowPrivilegeEscalation: false -> no_new_privs, as runc sets it.
  enum class Escalation { kAllowed, kNoNewPrivileges } escalation = Escalation::kAllowed;
  // The capabilities the process keeps (names such as "CAP_CHOWN"; the bounding set, and a root process's
  // effective/permitted/inheritable sets); unset: as started.
  std::optional<std::vector<std::string>> capabilities;
};

// containerd's default capabilities of a container (oci.DefaultCapabilities): what a pod's securityContext adds to
// and drops from.
const std::vector<std::string>& default_capabilities();

nlohmann::json to_json(const RootPlan& plan);
RootPlan root_plan_from_json(const nlohmann::json& doc);  // throws InvalidArgument naming the field

// The host's system folders and `programs`' folders read-only, /dev, /proc, /sys, a private /tmp and /dev/shm of
// `shm_bytes`: every container's base, before its volumes.
std::vector<RootMount> base_mounts(const std::vector<std::string>& programs, uint64_t shm_bytes);

// `target` (absolute, as the container names it) inside `root`, each link on the way resolved inside `root` as runc's
// securejoin does: an image's absolute link (/var/run -> /run) names the image's folder, never the host's. The last
// component is not followed (a mount or an entry replaces it).
std::filesystem::path resolve_in_root(const std::filesystem::path& root, const std::filesystem::path& target);

// An image's container base: /dev (runc's devices, devpts, the usual links), /proc, /sys read-only, a /dev/shm of
// `shm_bytes`. The rest is the image's.
std::vector<RootMount> image_base_mounts(uint64_t shm_bytes);

// In the calling process (which must be alone in its thread group, as after fork): a new mount namespace with
// `plan`'s root, then pivot_root into it, and a UTS namespace with the plan's host name. A mount at a path the
// /etc or /opt mirror holds as a link replaces that link. Throws SystemError naming the path that failed.
void enter_root(const RootPlan& plan);
// Then, still before the exec: no_new_privs, the capabilities, the user. Throws SystemError naming the call.
void become_user(const RootPlan& plan);

// A Kubernetes quantity ("64Mi", "1Gi", "500M", "1024") in bytes; throws InvalidArgument naming `field`.
uint64_t parse_quantity(const std::string& text, const std::string& field);

}  // namespace torus::standin
