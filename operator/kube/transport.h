#pragma once
// The HTTP(S) transport under the Kubernetes client. Its implementation is the only translation unit that
// includes cpprestsdk (slow to compile); everything else talks to this small interface, and tests can swap it.
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/util/error.h"
#include "operator/kube/config.h"

namespace torus::kube {

// The connection failed, broke, or timed out before a complete answer (retryable).
class ConnectionError : public SystemError {
 public:
  using SystemError::SystemError;
};

struct HttpRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;    // path and query, e.g. /api/v1/namespaces/ns/pods?labelSelector=a%3Db
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, when present
};

// Lets another thread abort a streaming request (a watch) that is blocked reading.
class StreamCancel {
 public:
  // Aborts the stream now (or as soon as it starts); idempotent.
  void cancel();
  bool cancelled() const;
  // Called by the transport: `abort` runs on cancel(), at once if already cancelled.
  void set_abort(std::function<void()> abort);
  void clear_abort();

 private:
  mutable std::mutex mu_;
  std::function<void()> abort_;
  enum class State { kActive, kCancelled } state_ = State::kActive;
};

using LineHandler = std::function<void(std::string_view line)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // One request, whole body. Throws ConnectionError when no complete answer arrived.
  virtual HttpResponse send(const HttpRequest& request) = 0;
  // A streaming request: for a 2xx answer calls `on_line` for each body line until the server closes, the
  // idle `timeout` passes between chunks, or `cancel` fires; returns the status (body empty). For other
  // statuses returns the status and whole body. Throws ConnectionError on a broken connection.
  virtual HttpResponse stream(const HttpRequest& request, const LineHandler& on_line, StreamCancel& cancel,
                              std::chrono::seconds timeout) = 0;
};

struct TransportOptions {
  std::chrono::seconds timeout{30};
};

// cpprestsdk over HTTP or HTTPS (CA, client certificate, or insecure skip verify from `config`). Throws
// net::DestinationRefused when the process's destination policy forbids the server (common/util/destination.h).
std::unique_ptr<Transport> make_http_transport(const ClusterConfig& config, const TransportOptions& options);

}  // namespace torus::kube
