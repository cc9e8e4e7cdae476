// Watches: newline-delimited JSON events in a chunked response, as the apiserver streams them.
#include <poll.h>

#include <boost/asio/write.hpp>

#include "tests/apiserver/request_handler.h"

namespace torus::standin {

bool RequestHandler::write_chunk(const std::string& data) {
  beast::error_code ec;
  connection_.with_stream([&](auto& stream) { asio::write(stream, http::make_chunk(asio::buffer(data)), ec); });
  return !ec;
}

void RequestHandler::write_last_chunk(beast::error_code& ec) {
  connection_.with_stream([&](auto& stream) { asio::write(stream, http::make_chunk_last(), ec); });
}

bool RequestHandler::peer_closed() {
  pollfd fd{connection_.socket.native_handle(), POLLIN | POLLRDHUP, 0};
  if (::poll(&fd, 1, 0) <= 0) return false;
  return (fd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// Streams watch events as newline-delimited JSON in a chunked response, as the apiserver does.
bool RequestHandler::serve_watch(const Target& target) {
  Store& store = server_.store_;
  WatchRequest watch;
  watch.type = target.type;
  watch.ns = target.ns;
  ListOptions selection = list_options(target);
  watch.labels = selection.labels;
  watch.fields = selection.fields;
  std::string rv = param(params_, "resourceVersion");
  if (!rv.empty()) {
    if (rv.find_first_not_of("0123456789") != std::string::npos) {
      throw bad_request("resourceVersion: must be a non-negative integer, got \"" + rv + "\"");
    }
    watch.resource_version = std::stoll(rv);
  }
  watch.bookmarks = truthy(param(params_, "allowWatchBookmarks"));
  watch.initial_events = validate_list_options(params_, true);
  int64_t timeout = int_param(params_, "timeoutSeconds", server_.options_.default_watch_timeout.count());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  bool table = wants_table();
  TableObjects include = table_objects();

  http::response<http::empty_body> header{http::status::ok, request_->version()};
  header.set(http::field::content_type, "application/json");
  header.set(http::field::cache_control, "no-cache, private");
  header.chunked(true);
  header.keep_alive(request_->keep_alive());
  http::response_serializer<http::empty_body> serializer{header};
  beast::error_code ec;
  connection_.with_stream([&](auto& stream) { http::write_header(stream, serializer, ec); });
  if (ec) return false;

  std::unique_ptr<WatchStream> stream;
  try {
    stream = store.watch(watch);
  } catch (const ApiError& e) {
    // The apiserver answers a watch from a compacted resourceVersion with 200 and one ERROR event.
    bool ok = write_chunk(json{{"type", "ERROR"}, {"object", e.status()}}.dump() + "\n");
    write_last_chunk(ec);
    return ok && !ec && request_->keep_alive();
  }
  ++server_.open_watches_;
  struct Decrement {
    std::atomic<int>& n;
    ~Decrement() { --n; }
  } decrement{server_.open_watches_};

  std::vector<WatchEvent> events;
  while (true) {
    // Wake at least once a second to notice a client that went away.
    auto wake = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    WatchStream::Outcome outcome = stream->next(wake, events);
    switch (outcome) {
      case WatchStream::Outcome::kEvents: {
        std::string data;
        for (const WatchEvent& e : events) {
          json object = table && e.type != "BOOKMARK" ? to_table(*target.type, {e.object}, include) : *e.object;
          if (table && e.type != "BOOKMARK")
            object["metadata"]["resourceVersion"] = (*e.object)["metadata"]["resourceVersion"];
          data += json{{"type", e.type}, {"object", object}}.dump();
          data += "\n";
        }
        if (!write_chunk(data)) return false;
        break;
      }
      case WatchStream::Outcome::kTimeout:
        if (std::chrono::steady_clock::now() < deadline) {
          if (peer_closed()) return false;
          break;
        }
        write_last_chunk(ec);
        return !ec && request_->keep_alive();
      case WatchStream::Outcome::kExpired: {
        json status = gone(stream->expired_message()).status();
        write_chunk(json{{"type", "ERROR"}, {"object", status}}.dump() + "\n");
        write_last_chunk(ec);
        return !ec && request_->keep_alive();
      }
      case WatchStream::Outcome::kDropped:
      case WatchStream::Outcome::kClosed:
        // A dropped watch looks to the client like a connection that broke: no final chunk.
        connection_.socket.shutdown(tcp::socket::shutdown_both, ec);
        return false;
    }
  }
}

}  // namespace torus::standin
