#pragma once
// Serves a Registry over HTTP: `GET /metrics` (Prometheus text format) and `GET /healthz`, plus any handlers the
// owner adds (the operator adds `/readyz`). One background thread runs a Boost.Asio loop; the destructor stops it.
//
//   HttpExporter exporter(registry, {.host = "0.0.0.0", .port = 9400});
//   exporter.add_handler("/readyz", [&] { return HttpResponse{ready ? 200 : 503, "text/plain", "ok\n"}; });
#include <functional>
#include <memory>
#include <string>

#include "common/metrics/registry.h"

namespace torus::metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called on the exporter's thread for each GET of its path; must not block for long and must not throw
// (an exception becomes a 500 with its message).
using HttpHandler = std::function<HttpResponse()>;

struct HttpExporterOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: the kernel picks a free port; read it back with port()
};

class HttpExporter {
 public:
  // Binds and starts serving before returning. Throws SystemError when the address cannot be bound, naming it.
  HttpExporter(const Registry& registry, const HttpExporterOptions& options);
  ~HttpExporter();
  HttpExporter(const HttpExporter&) = delete;
  HttpExporter& operator=(const HttpExporter&) = delete;

  // The bound port (useful with port 0).
  uint16_t port() const;
  // Adds or replaces the handler for an exact path such as "/readyz". Safe to call while serving.
  void add_handler(const std::string& path, HttpHandler handler);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace torus::metrics
