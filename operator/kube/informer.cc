#include "operator/kube/informer.h"

#include <utility>

#include "common/log/log.h"

namespace torus::kube {

void Store::add_index(const std::string& name, IndexFunc func) {
  std::lock_guard lock(mu_);
  index_funcs_[name] = std::move(func);
}

void Store::index_locked(const std::string& key, const json& object) {
  for (const auto& [name, func] : index_funcs_) {
    for (const auto& value : func(object)) indexes_[name][value].insert(key);
  }
}

void Store::unindex_locked(const std::string& key, const json& object) {
  for (const auto& [name, func] : index_funcs_) {
    for (const auto& value : func(object)) {
      auto& keys = indexes_[name][value];
      keys.erase(key);
      if (keys.empty()) indexes_[name].erase(value);
    }
  }
}

std::pair<ObjectPtr, ObjectPtr> Store::upsert(json object) {
  std::string key = object_key(object);
  auto cached = std::make_shared<const json>(std::move(object));
  std::lock_guard lock(mu_);
  ObjectPtr& slot = objects_[key];
  ObjectPtr old = std::exchange(slot, cached);
  if (old) unindex_locked(key, *old);
  index_locked(key, *cached);
  return {std::move(cached), std::move(old)};
}

ObjectPtr Store::erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  objects_.erase(it);
  unindex_locked(key, *old);
  return old;
}

std::vector<ObjectPtr> Store::replace(const std::vector<ObjectPtr>& objects) {
  std::lock_guard lock(mu_);
  std::map<std::string, ObjectPtr> fresh;
  for (const auto& o : objects) fresh[object_key(*o)] = o;
  std::vector<ObjectPtr> gone;
  for (const auto& [key, obj] : objects_) {
    if (!fresh.count(key)) gone.push_back(obj);
  }
  objects_ = std::move(fresh);
  indexes_.clear();
  for (const auto& [key, obj] : objects_) index_locked(key, *obj);
  return gone;
}

ObjectPtr Store::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::by_index(const std::string& index, const std::string& value) const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  auto idx = indexes_.find(index);
  if (idx == indexes_.end()) return out;
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return out;
  out.reserve(keys->second.size());
  for (const auto& key : keys->second) out.push_back(objects_.at(key));
  return out;
}

std::vector<ObjectPtr> Store::list() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) out.push_back(obj);
  return out;
}

std::vector<std::string> Store::keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [key, obj] : objects_) out.push_back(key);
  return out;
}

size_t Store::size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

Informer::Informer(Client& client, Resource resource, InformerOptions options, InformerHandlers handlers)
    : client_(client), resource_(std::move(resource)), options_(std::move(options)), handlers_(std::move(handlers)) {}

Informer::~Informer() { stop(); }

void Informer::start() {
  std::lock_guard lock(mu_);
  if (state_ != State::kIdle) return;
  state_ = State::kRunning;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kRunning) return;
    state_ = State::kStopping;
  }
  cv_.notify_all();
  cancel_.cancel();
  if (thread_.joinable()) thread_.join();
}

bool Informer::wait_synced(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return synced_.load() || state_ == State::kStopping; }) && synced_;
}

bool Informer::pause(Duration d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [&] { return state_ == State::kStopping; });
}

void Informer::list_into_store() {
  json list = client_.list(resource_, options_.namespace_, ListOptions{options_.label_selector, "", ""});
  std::vector<ObjectPtr> items;
  if (auto it = list.find("items"); it != list.end() && it->is_array()) {
    items.reserve(it->size());
    for (auto& item : *it) {
      // List items carry no apiVersion/kind; handlers may want them.
      item["apiVersion"] = resource_.api_version();
      item["kind"] = resource_.kind;
      options_.fields.apply(item);
      items.push_back(std::make_shared<const json>(options_.transform ? options_.transform(std::move(item))
                                                                      : std::move(item)));
    }
  }
  std::vector<ObjectPtr> previous;
  previous.reserve(items.size());
  for (const auto& item : items) previous.push_back(store_.get(object_key(*item)));
  std::vector<ObjectPtr> gone = store_.replace(items);
  resource_version_ = list["metadata"].value("resourceVersion", "");
  // Replay the difference as events, so handlers see deletions that happened while we were not watching.
  for (size_t i = 0; i < items.size(); ++i) {
    if (!previous[i] && handlers_.on_add) handlers_.on_add(*items[i]);
    if (previous[i] && handlers_.on_update &&
        (*previous[i])["metadata"]["resourceVersion"] != (*items[i])["metadata"]["resourceVersion"]) {
      handlers_.on_update(*previous[i], *items[i]);
    }
  }
  for (const auto& obj : gone) {
    if (handlers_.on_delete) handlers_.on_delete(*obj);
  }
  if (!synced_.exchange(true)) {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
}

void Informer::apply(WatchEvent& event) {
  if (auto md = event.object.find("metadata"); md != event.object.end() && md->is_object()) {
    if (auto rv = md->find("resourceVersion"); rv != md->end() && rv->is_string()) {
      resource_version_ = rv->get<std::string>();
    }
  }
  if (event.type == "BOOKMARK") return;
  json object = options_.transform ? options_.transform(std::move(event.object)) : std::move(event.object);
  if (event.type == "DELETED") {
    store_.erase(object_key(object));
    if (handlers_.on_delete) handlers_.on_delete(object);
    return;
  }
  auto [cached, old] = store_.upsert(std::move(object));
  if (old && handlers_.on_update) {
    handlers_.on_update(*old, *cached);
  } else if (!old && handlers_.on_add) {
    handlers_.on_add(*cached);
  }
}

void Informer::watch_once() {
  WatchOptions wo{options_.label_selector, resource_version_, options_.watch_timeout,
                  options_.fields.empty() ? nullptr : &options_.fields};
  WatchEnd end = client_.watch(
      resource_, options_.namespace_, wo, [&](WatchEvent& ev) { apply(ev); }, cancel_);
  if (end == WatchEnd::kExpired) {
    TLOG(Info) << "watch " << resource_.plural << ": resourceVersion " << resource_version_ << " expired; relisting";
    resource_version_.clear();
  }
}

void Informer::run() {
  int failures = 0;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (state_ == State::kStopping) return;
    }
    try {
      if (resource_version_.empty()) {
        if (synced_) ++relists_;
        list_into_store();
      } else {
        ++rewatches_;
        watch_once();
      }
      failures = 0;
    } catch (const std::exception& e) {  // the informer thread's top: it must outlive any one failure
      // A dropped connection or a server error: back off, then re-watch from the last resourceVersion
      // (or relist when the watch said our resourceVersion is gone).
      if (auto* api = dynamic_cast<const ApiError*>(&e); api && api->gone()) resource_version_.clear();
      TLOG(Warn) << "informer " << resource_.plural << ": " << e.what();
      if (!pause(backoff_delay(options_.retry_base, options_.retry_cap, failures++))) return;
    }
  }
}

}  // namespace torus::kube
