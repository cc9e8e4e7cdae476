// Watches: a cursor over the store's bounded event history, with selector scoping and bookmarks.
#include <algorithm>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/store.h"

namespace torus::standin {

std::unique_ptr<WatchStream> Store::watch(const WatchRequest& request) {
  std::unique_ptr<WatchStream> stream(
      new WatchStream(*this, request.type, request.ns, request.labels, request.fields, request.bookmarks));
  std::lock_guard lock(mutex_);
  stream->epoch_ = drop_epoch_;
  const int64_t from = request.resource_version.value_or(0);
  const bool send_state = request.initial_events == InitialEvents::kSend ||
                          (request.initial_events == InitialEvents::kByResourceVersion && from == 0);
  if (send_state || from == 0) {
    // "Start at most recent" (sendInitialEvents=true also starts there: this store serves only its newest state,
    // which is never older than a resourceVersion it handed out).
    if (send_state) add_current_state(*stream, *request.type);
    stream->cursor_ = rv_;
    if (request.initial_events == InitialEvents::kSend && request.bookmarks) {
      // The end of the initial events: what a client-go reflector waits for before it calls itself synced.
      json bookmark = {{"kind", request.type->kind},
                       {"apiVersion", request.type->api_version()},
                       {"metadata",
                        {{"resourceVersion", std::to_string(rv_)},
                         {"annotations", {{"k8s.io/initial-events-end", "true"}}}}}};
      stream->initial_.push_back({"BOOKMARK", std::make_shared<const json>(std::move(bookmark))});
    }
    return stream;
  }
  if (from < compacted_rv_) {
    throw gone("too old resource version: " + std::to_string(from) + " (" + std::to_string(compacted_rv_) + ")");
  }
  stream->cursor_ = std::min(from, rv_);
  return stream;
}

// The objects in the watch's scope as synthetic ADDED events. Called with mutex_ held.
void Store::add_current_state(WatchStream& stream, const ResourceType& type) const {
  auto objects = objects_.find(stream.group_resource_);
  if (objects == objects_.end()) return;
  for (const auto& [key, object] : objects->second) {
    if (!stream.namespace_.empty() && namespace_of(*object) != stream.namespace_) continue;
    if (!stream.labels_.matches((*object)["metadata"].value("labels", json()))) continue;
    if (!stream.fields_.matches(*object)) continue;
    stream.initial_.push_back({"ADDED", as_version(object, type)});
  }
}

WatchStream::WatchStream(Store& store, ResourcePtr type, std::string ns, LabelSelector labels, FieldSelector fields,
                         bool bookmarks)
    : store_(store),
      type_(std::move(type)),
      group_resource_(type_->group_resource()),
      namespace_(std::move(ns)),
      labels_(std::move(labels)),
      fields_(std::move(fields)),
      bookmarks_(bookmarks),
      next_bookmark_(std::chrono::steady_clock::now() + store.options_.bookmark_interval) {}

WatchStream::~WatchStream() = default;

void WatchStream::cancel() {
  std::lock_guard lock(store_.mutex_);
  cancelled_ = true;
  store_.changed_.notify_all();
}

WatchStream::Outcome WatchStream::next(std::chrono::steady_clock::time_point deadline, std::vector<WatchEvent>& out) {
  out.clear();
  if (!initial_.empty()) {
    out.swap(initial_);
    return Outcome::kEvents;
  }
  std::unique_lock lock(store_.mutex_);
  auto in_scope = [&](const json& object) {
    if (!namespace_.empty() && namespace_of(object) != namespace_) return false;
    return labels_.matches(object["metadata"].value("labels", json())) && fields_.matches(object);
  };
  while (true) {
    if (store_.closed_ || cancelled_) return Outcome::kClosed;
    if (store_.drop_epoch_ != epoch_) return Outcome::kDropped;
    if (cursor_ < store_.compacted_rv_ && !(store_.history_.empty() && cursor_ == store_.rv_)) {
      expired_message_ =
          "too old resource version: " + std::to_string(cursor_) + " (" + std::to_string(store_.compacted_rv_) + ")";
      return Outcome::kExpired;
    }
    auto& history = store_.history_;
    auto first = std::upper_bound(history.begin(), history.end(), cursor_,
                                  [](int64_t rv, const Store::HistoryEvent& e) { return rv < e.rv; });
    for (auto it = first; it != history.end(); ++it) {
      cursor_ = it->rv;
      if (it->group_resource != group_resource_) continue;
      bool now_in = in_scope(*it->object);
      bool was_in = it->previous && in_scope(*it->previous);
      if (it->type == EventType::kModified) {
        if (now_in && was_in) {
          out.push_back({"MODIFIED", Store::as_version(it->object, *type_)});
        } else if (now_in) {
          out.push_back({"ADDED", Store::as_version(it->object, *type_)});
        } else if (was_in) {
          out.push_back({"DELETED", Store::as_version(it->object, *type_)});
        }
      } else if (now_in) {
        out.push_back({event_type_name(it->type), Store::as_version(it->object, *type_)});
      }
    }
    cursor_ = std::max(cursor_, store_.rv_);
    if (!out.empty()) return Outcome::kEvents;
    auto now = std::chrono::steady_clock::now();
    if (bookmarks_ && now >= next_bookmark_) {
      next_bookmark_ = now + store_.options_.bookmark_interval;
      json bookmark = {{"kind", type_->kind},
                       {"apiVersion", type_->api_version()},
                       {"metadata", {{"resourceVersion", std::to_string(cursor_)}}}};
      out.push_back({"BOOKMARK", std::make_shared<const json>(std::move(bookmark))});
      return Outcome::kEvents;
    }
    if (now >= deadline) return Outcome::kTimeout;
    auto wake = bookmarks_ ? std::min(deadline, next_bookmark_) : deadline;
    store_.changed_.wait_until(lock, wake);
  }
}

}  // namespace torus::standin
