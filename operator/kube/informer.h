#pragma once
// Informers: list, then watch from the list's resourceVersion (with bookmarks) into a local cache; relist on
// 410 Gone; re-watch after a dropped connection. Handlers run on the informer's thread.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "operator/kube/client.h"

namespace torus::kube {

// A cached object: immutable once cached, shared by the cache and its readers (a reader never copies it, and an
// object replaced in the cache lives on for the readers still holding it), as client-go's caches share pointers.
using ObjectPtr = std::shared_ptr<const json>;

// A thread-safe cache of objects by "ns/name", with named secondary indexes (e.g. pods by owning job).
class Store {
 public:
  using IndexFunc = std::function<std::vector<std::string>(const json& object)>;

  // Adds an index; call before the informer starts.
  void add_index(const std::string& name, IndexFunc func);
  // Inserts or replaces; returns the cached object and the previous one (null when none).
  std::pair<ObjectPtr, ObjectPtr> upsert(json object);
  ObjectPtr erase(const std::string& key);  // the removed object, null when none
  // Replaces everything (after a list); returns the objects that disappeared.
  std::vector<ObjectPtr> replace(const std::vector<ObjectPtr>& objects);

  ObjectPtr get(const std::string& key) const;  // null when absent
  std::vector<ObjectPtr> by_index(const std::string& index, const std::string& value) const;
  std::vector<ObjectPtr> list() const;
  std::vector<std::string> keys() const;
  size_t size() const;

 private:
  void index_locked(const std::string& key, const json& object);
  void unindex_locked(const std::string& key, const json& object);

  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;  // index -> value -> keys
};

struct InformerHandlers {
  std::function<void(const json& object)> on_add;
  std::function<void(const json& old_object, const json& object)> on_update;
  std::function<void(const json& object)> on_delete;
};

struct InformerOptions {
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  // Applied to every object before it is cached and handed to the handlers (e.g. keep only what is read).
  std::function<json(json)> transform;
  // The fields cached (and handed to the handlers), applied while a watch event is parsed: the cheaper way to leave
  // out what is never read. Listed objects get the same filter.
  FieldFilter fields;
  std::chrono::seconds watch_timeout{300};
  Duration retry_base = std::chrono::milliseconds(100);
  Duration retry_cap = std::chrono::seconds(10);
};

class Informer {
 public:
  Informer(Client& client, Resource resource, InformerOptions options, InformerHandlers handlers);
  ~Informer();  // stops and joins
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  Store& store() { return store_; }
  void start();
  void stop();
  // Blocks until the first list landed in the cache, or `timeout`; returns whether it did.
  bool wait_synced(std::chrono::milliseconds timeout);
  bool synced() const { return synced_.load(); }
  // Counters for tests and metrics.
  int relists() const { return relists_.load(); }
  int rewatches() const { return rewatches_.load(); }

 private:
  void run();
  void list_into_store();
  void watch_once();
  void apply(WatchEvent& event);  // takes the event's object
  // Sleeps for `d` unless stopped first; returns false when stopped.
  bool pause(Duration d);

  Client& client_;
  Resource resource_;
  InformerOptions options_;
  InformerHandlers handlers_;
  Store store_;
  std::string resource_version_;
  std::atomic<bool> synced_{false};
  std::atomic<int> relists_{0};
  std::atomic<int> rewatches_{0};
  enum class State { kIdle, kRunning, kStopping } state_ = State::kIdle;
  std::mutex mu_;
  std::condition_variable cv_;
  StreamCancel cancel_;
  std::thread thread_;
};

}  // namespace torus::kube
