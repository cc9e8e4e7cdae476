#include "tests/apiserver/taint_eviction.h"

#include "common/log/log.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/eviction.h"
#include "tests/apiserver/scheduling.h"
#include "tests/apiserver/selectors.h"

namespace torus::standin {

using json = nlohmann::json;

TaintEviction::TaintEviction(Store& store)
    : store_(store),
      pods_(*store.registry().find("", "v1", "pods")),
      nodes_(*store.registry().find("", "v1", "nodes")) {
  watcher_ = std::thread([this] { watch_nodes(); });
  evictor_ = std::thread([this] { evict_when_due(); });
}

TaintEviction::~TaintEviction() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->cancel();
  }
  changed_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (evictor_.joinable()) evictor_.join();
}

void TaintEviction::pod_changed(const json& pod) {
  const std::string node = pod.value("spec", json::object()).value("nodeName", "");
  if (node.empty()) return;
  try {
    judge(pod, (*store_.get(nodes_, "", node)).value("spec", json::object()).value("taints", json::array()));
  } catch (const ApiError& e) {
    if (e.code() != 404) throw;  // a pod bound to a node that is not there: nothing taints it
  }
}

void TaintEviction::judge(const json& pod, const json& taints) {
  const std::string key = object_key(namespace_of(pod), name_of(pod));
  const std::string phase = pod.value("status", json::object()).value("phase", "");
  std::optional<std::chrono::seconds> grace;  // a finished pod has nothing left to evict
  if (phase != "Succeeded" && phase != "Failed") grace = noexecute_grace(pod, taints);
  std::lock_guard lock(mutex_);
  if (!grace) {
    due_.erase(key);
    return;
  }
  // An eviction already planned keeps its time, as the controller keeps a scheduled one that is not later.
  const Clock::time_point when = Clock::now() + *grace;
  auto it = due_.find(key);
  if (it == due_.end() || when < it->second.when) {
    due_[key] = Due{when, pod["metadata"].value("uid", "")};
    changed_.notify_all();
  }
}

void TaintEviction::judge_pods_on(const json& node) {
  ListOptions on_node;
  on_node.fields = FieldSelector::parse("spec.nodeName=" + name_of(node), supported_fields("pods"));
  const json taints = node.value("spec", json::object()).value("taints", json::array());
  for (const ObjectPtr& pod : store_.list(pods_, "", on_node).items) judge(*pod, taints);
}

void TaintEviction::watch_nodes() {
  while (!stopping_) {
    WatchRequest request;
    request.type = store_.registry().find("", "v1", "nodes");
    request.initial_events = InitialEvents::kSend;
    std::unique_ptr<WatchStream> stream = store_.watch(request);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stream_ = stream.get();
    }
    std::vector<WatchEvent> events;
    WatchStream::Outcome outcome = WatchStream::Outcome::kEvents;
    while (!stopping_ && outcome != WatchStream::Outcome::kDropped && outcome != WatchStream::Outcome::kExpired) {
      outcome = stream->next(Clock::now() + std::chrono::hours(1), events);
      if (outcome == WatchStream::Outcome::kClosed) break;
      for (const WatchEvent& e : events) {
        if (e.type == "ADDED" || e.type == "MODIFIED") judge_pods_on(*e.object);
      }
    }
    std::lock_guard lock(mutex_);
    stream_ = nullptr;
    if (outcome == WatchStream::Outcome::kClosed) return;
  }
}

void TaintEviction::evict_when_due() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    auto next = due_.end();
    for (auto it = due_.begin(); it != due_.end(); ++it) {
      if (next == due_.end() || it->second.when < next->second.when) next = it;
    }
    if (next == due_.end()) {
      changed_.wait(lock);
      continue;
    }
    if (Clock::now() < next->second.when) {
      changed_.wait_until(lock, next->second.when);
      continue;
    }
    const std::string key = next->first, uid = next->second.uid;
    due_.erase(next);
    lock.unlock();
    evict(key, uid);
    lock.lock();
  }
}

void TaintEviction::evict(const std::string& key, const std::string& uid) {
  const size_t slash = key.find('/');
  DeleteOptions deletion;
  deletion.precondition_uid = uid;  // not a pod of the same name made since
  try {
    add_condition_and_delete(store_, pods_, key.substr(0, slash), key.substr(slash + 1), deletion,
                             kTaintEvictionReason, kTaintEvictionMessage);
  } catch (const ApiError& e) {  // the thread's top: a pod gone or replaced meanwhile has nothing to evict
    if (e.code() != 404 && e.code() != 409) {
      TLOG(Warn) << "taint eviction: " << key << ": " << e.what();
    }
  }
}

}  // namespace torus::standin
