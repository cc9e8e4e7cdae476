#pragma once
// The object store behind the stand-in: what etcd plus the apiserver's registry do for the resources we serve.
// One global resourceVersion counter, a bounded event history that watches read from (410 Expired once a watch
// falls behind it), metadata (uid, creationTimestamp, generation), the status subresource, optimistic concurrency,
// finalizers and deletionTimestamp, owner-reference garbage collection and custom resource schemas.
//
// Thread-safe: one mutex guards everything; objects are immutable once stored (shared_ptr<const json>), so
// readers serialize them outside the lock.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/field_manager.h"
#include "tests/apiserver/patch.h"
#include "tests/apiserver/query.h"
#include "tests/apiserver/resources.h"
#include "tests/apiserver/selectors.h"

namespace torus::standin {

using ObjectPtr = std::shared_ptr<const json>;

enum class EventType { kAdded, kModified, kDeleted };
const char* event_type_name(EventType type);

enum class Subresource { kMain, kStatus };
// How unknown fields of a custom resource are treated (the `fieldValidation` query parameter).
enum class FieldValidation { kIgnore, kWarn, kStrict };
enum class DryRun { kNo, kAll };
enum class Propagation { kBackground, kForeground, kOrphan };
// Pods bound to a node are deleted gracefully (deletionTimestamp first, the kubelet removes them) only when a
// kubelet is there to finish the job; without one they go at once, as if gracePeriodSeconds=0.
enum class PodDeletion { kImmediate, kGraceful };

// Who owns what a write sets (metadata.managedFields): the write's own changes (any write but an apply), or the
// managedFields a server-side apply computed (field_manager.h).
enum class FieldOwnership { kTrackChanges, kPresetByApply };

struct WriteOptions {
  FieldValidation validation = FieldValidation::kWarn;
  DryRun dry_run = DryRun::kNo;
  std::string field_manager;  // the fieldManager parameter, or the User-Agent's product; "": the stand-in's own
  FieldOwnership ownership = FieldOwnership::kTrackChanges;
};

// A write's result: the stored object, plus warnings for the `Warning` header (pruned unknown fields).
enum class WriteKind { kUpdated, kCreated };

struct WriteResult {
  ObjectPtr object;
  std::vector<std::string> warnings;
  WriteKind kind = WriteKind::kUpdated;
};

struct DeleteOptions {
  Propagation propagation = Propagation::kBackground;
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid;
  std::string precondition_resource_version;
  DryRun dry_run = DryRun::kNo;
};

struct DeleteResult {
  ObjectPtr object;                                           // the object's last state
  enum class State { kGone, kPending } state = State::kGone;  // kPending: kept with deletionTimestamp
};

struct ListOptions {
  LabelSelector labels;
  FieldSelector fields;
  int64_t limit = 0;  // 0: no limit
  std::string continue_token;
};

struct ListResult {
  std::vector<ObjectPtr> items;
  int64_t resource_version = 0;
  std::string continue_token;
  int64_t remaining = 0;
};

struct StoreOptions {
  size_t history_limit = 50000;  // events kept for watches to resume from
  std::chrono::milliseconds bookmark_interval{10000};
  // The CA the apiserver's serving certificate chains to: every namespace's ConfigMap kube-root-ca.crt (ca.crt).
  std::string root_ca_pem;
};

// One event as a watch hands it out.
struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  ObjectPtr object;
};

class Store;

// A watch's cursor over the event history. next() blocks until events come, a bookmark is due, the deadline
// passes, or the watch ends (dropped by fault injection, expired by compaction, store closed).
class WatchStream {
 public:
  enum class Outcome { kEvents, kTimeout, kDropped, kExpired, kClosed };
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  Outcome next(std::chrono::steady_clock::time_point deadline, std::vector<WatchEvent>& out);
  // Ends this watch: a next() blocked in another thread returns kClosed.
  void cancel();
  // The Status of a kExpired outcome ("too old resource version: 5 (10)").
  const std::string& expired_message() const { return expired_message_; }
  int64_t resource_version() const { return cursor_; }

 private:
  friend class Store;
  WatchStream(Store& store, ResourcePtr type, std::string ns, LabelSelector labels, FieldSelector fields,
              bool bookmarks);

  Store& store_;
  ResourcePtr type_;
  std::string group_resource_;
  std::string namespace_;
  LabelSelector labels_;
  FieldSelector fields_;
  bool bookmarks_;
  int64_t cursor_ = 0;
  uint64_t epoch_ = 0;
  bool cancelled_ = false;  // guarded by the store's mutex
  std::vector<WatchEvent> initial_;
  std::chrono::steady_clock::time_point next_bookmark_;
  std::string expired_message_;
};

struct WatchRequest {
  ResourcePtr type;
  std::string ns;  // "" for all namespaces
  LabelSelector labels;
  FieldSelector fields;
  std::optional<int64_t> resource_version;  // nullopt or 0: start at the most recent state
  bool bookmarks = false;
  InitialEvents initial_events = InitialEvents::kByResourceVersion;
};

class Store {
 public:
  explicit Store(StoreOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  Registry& registry() { return registry_; }
  const Registry& registry() const { return registry_; }

  WriteResult create(const ResourceType& type, const std::string& ns, json object, const WriteOptions& options = {});
  ObjectPtr get(const ResourceType& type, const std::string& ns, const std::string& name) const;
  ListResult list(const ResourceType& type, const std::string& ns, const ListOptions& options = {}) const;
  // PUT: `object.metadata.resourceVersion`, when set, must match (409 otherwise).
  WriteResult update(const ResourceType& type, const std::string& ns, const std::string& name, json object,
                     Subresource subresource, const WriteOptions& options = {});
  WriteResult patch(const ResourceType& type, const std::string& ns, const std::string& name, PatchType patch_type,
                    const json& patch, Subresource subresource, const WriteOptions& options = {});
  DeleteResult remove(const ResourceType& type, const std::string& ns, const std::string& name,
                      const DeleteOptions& options = {});
  std::vector<ObjectPtr> remove_collection(const ResourceType& type, const std::string& ns,
                                           const ListOptions& selection, const DeleteOptions& options = {});
  // Server-side apply (PATCH application/apply-patch+yaml): creates the object when it does not exist; 409 Conflict
  // naming the fields and their managers when it changes a field another manager owns, unless `force`.
  WriteResult apply(const ResourceType& type, const std::string& ns, const std::string& name, const json& applied,
                    Subresource subresource, const WriteOptions& options, Force force);
  // The pods/binding subresource: what a scheduler does to place a pod on a node.
  ObjectPtr bind(const std::string& ns, const std::string& pod, const std::string& node);

  // Throws ApiError 410 when the resourceVersion is older than the history.
  std::unique_ptr<WatchStream> watch(const WatchRequest& request);

  int64_t resource_version() const;
  // Forgets the history up to now: a watch resuming from an older resourceVersion gets 410 Expired.
  void compact();
  // Ends every open watch now (each stream reports kDropped).
  void drop_watches();
  // Ends every watch for good (server shutdown).
  void close();
  void set_pod_deletion(PodDeletion mode);

  // The served form of a stored object: apiVersion of the requested version.
  static ObjectPtr as_version(const ObjectPtr& object, const ResourceType& type);

 private:
  friend class WatchStream;
  void add_current_state(WatchStream& stream, const ResourceType& type) const;
  struct HistoryEvent {
    int64_t rv;
    EventType type;
    std::string group_resource;
    ObjectPtr object;
    ObjectPtr previous;  // MODIFIED: the state before, so selector watches see objects leave and enter
  };
  using Objects = std::map<std::string, ObjectPtr>;  // "namespace/name" -> object

  WriteResult create_locked(const ResourceType& type, const std::string& ns, json object, const WriteOptions& options);
  // Sets after's metadata.managedFields for a write of `options` (before: null for a create; preset: what an apply
  // computed).
  static void own_fields(const ResourceType& type, const json* before, json& after, const json& preset,
                         Subresource subresource, const WriteOptions& options);
  WriteResult update_locked(const ResourceType& type, const std::string& ns, const std::string& name, json object,
                            Subresource subresource, const WriteOptions& options, bool require_resource_version);
  DeleteResult remove_locked(const ResourceType& type, const std::string& ns, const std::string& name,
                             const DeleteOptions& options);
  ObjectPtr find_locked(const std::string& group_resource, const std::string& key) const;
  ObjectPtr require_locked(const ResourceType& type, const std::string& ns, const std::string& name) const;
  void check_namespace_locked(const ResourceType& type, const std::string& ns) const;
  void admit_service_account_locked(const std::string& ns, json& pod);
  // The other admission plugins (store_admission.cc), in kube-apiserver's order: Priority's mutation of a new pod after
  // the ServiceAccount plugin's; after decoding and validation, PodSecurity's (pods, pod templates, namespace labels)
  // and Priority's (PriorityClasses) validation.
  void admit_priority_locked(json& pod, const std::string& name) const;
  void admit_validating_locked(const ResourceType& type, const std::string& ns, const json& object, const json* before,
                               Subresource subresource, std::vector<std::string>& warnings) const;
  std::vector<const json*> objects_locked(const std::string& group_resource, const std::string& ns) const;
  void create_namespace_defaults_locked(const std::string& ns);
  void admit_builtin(const ResourceType& type, json& object, const WriteOptions& options,
                     std::vector<std::string>& warnings) const;
  void admit_custom(const ResourceType& type, json& object, const WriteOptions& options,
                    std::vector<std::string>& warnings) const;
  ObjectPtr commit_locked(const std::string& group_resource, const std::string& key, json object, EventType type,
                          ObjectPtr previous);
  void erase_locked(const std::string& group_resource, const std::string& key, const ObjectPtr& last);
  void record_locked(int64_t rv, EventType type, const std::string& group_resource, ObjectPtr object,
                     ObjectPtr previous);
  // Garbage collection after a deletion: dependents of gone owners, foreground and orphan finalizers, namespaces.
  void collect_garbage_locked();
  bool owner_exists_locked(const std::string& uid) const;
  void delete_object_locked(const std::string& group_resource, const std::string& key, Propagation propagation);
  void finish_deletion_locked(const std::string& group_resource, const std::string& key);

  StoreOptions options_;
  Registry registry_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Objects> objects_;                             // group_resource -> objects
  std::map<std::string, std::pair<std::string, std::string>> by_uid_;  // uid -> (group_resource, key)
  std::deque<HistoryEvent> history_;
  int64_t rv_ = 1;
  int64_t compacted_rv_ = 1;  // watches may resume from this resourceVersion or later
  uint64_t drop_epoch_ = 0;
  bool closed_ = false;
  PodDeletion pod_deletion_ = PodDeletion::kImmediate;
  uint32_t next_cluster_ip_ = 10;
};

// Helpers shared with the server and the kubelet simulation.
std::string now_rfc3339();
std::string object_key(const std::string& ns, const std::string& name);
std::string name_of(const json& object);
std::string namespace_of(const json& object);
int64_t resource_version_of(const json& object);

}  // namespace torus::standin
