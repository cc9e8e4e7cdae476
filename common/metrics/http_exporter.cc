#include "common/metrics/http_exporter.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A scraper that stops talking mid-request must not hold the connection forever.
constexpr std::chrono::seconds kIdleTimeout{30};

// Looks up the handler for a path; shared by every session on the exporter thread.
class Router {
 public:
  void set(const std::string& path, HttpHandler handler) {
    std::lock_guard lock(mutex_);
    handlers_[path] = std::move(handler);
  }

  HttpResponse dispatch(http::verb method, const std::string& path) const {
    if (method != http::verb::get && method != http::verb::head) {
      return {405, "text/plain; charset=utf-8", "only GET is supported\n"};
    }
    HttpHandler handler;
    {
      std::lock_guard lock(mutex_);
      auto it = handlers_.find(path);
      if (it == handlers_.end()) return {404, "text/plain; charset=utf-8", "no handler for " + path + "\n"};
      handler = it->second;
    }
    try {
      return handler();
    } catch (const std::exception& e) {
      // A failing handler is reported to the scraper rather than taking the exporter thread down.
      return {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
    }
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, HttpHandler> handlers_;
};

// The path without its query string: "/metrics?x=1" -> "/metrics".
std::string path_of(beast::string_view target) {
  const auto end = target.find('?');
  return std::string(target.substr(0, end));
}

// One connection: read a request, answer it, repeat while the client keeps the connection alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Router& router) : stream_(std::move(socket)), router_(router) {}

  void start() { read(); }

 private:
  void read() {
    request_ = {};
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) return close();  // client closed, timed out or sent garbage: nothing to answer
    const HttpResponse answer = router_.dispatch(request_.method(), path_of(request_.target()));
    response_ = {};
    response_.version(request_.version());
    response_.result(static_cast<unsigned>(answer.status));
    response_.set(http::field::server, "torus");
    response_.set(http::field::content_type, answer.content_type);
    response_.keep_alive(request_.keep_alive());
    if (request_.method() != http::verb::head) response_.body() = answer.body;
    response_.prepare_payload();
    if (request_.method() == http::verb::head) response_.content_length(answer.body.size());
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code wec, size_t) { self->on_write(wec); });
  }

  void on_write(beast::error_code ec) {
    if (ec || !response_.keep_alive()) return close();
    read();
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  const Router& router_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

struct HttpExporter::Impl {
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  Router router;
  uint16_t bound_port = 0;  // read once after bind: the acceptor itself belongs to the exporter thread
  std::thread thread;

  void bind(const HttpExporterOptions& options) {
    beast::error_code ec;
    const auto address = asio::ip::make_address(options.host, ec);
    if (ec) throw InvalidArgument("metrics exporter host: expected an IP address, got '" + options.host + "'");
    const tcp::endpoint endpoint(address, options.port);
    const std::string where = options.host + ":" + std::to_string(options.port);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) throw SystemError("metrics exporter: cannot listen on " + where + ": " + ec.message());
    bound_port = acceptor.local_endpoint().port();
  }

  void accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), router)->start();
      accept();
    });
  }
};

HttpExporter::HttpExporter(const Registry& registry, const HttpExporterOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->bind(options);
  impl_->router.set("/metrics", [&registry] { return HttpResponse{200, kExpositionContentType, registry.expose()}; });
  impl_->router.set("/healthz", [] { return HttpResponse{200, "text/plain; charset=utf-8", "ok\n"}; });
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->ioc.run();
    } catch (const std::exception& e) {
      // Only asio internals can throw here (handlers catch their own); the process keeps training regardless.
      TLOG(Error) << "metrics exporter stopped: " << e.what();
    }
  });
  TLOG(Debug) << "metrics exporter listening on " << options.host << ":" << port();
}

HttpExporter::~HttpExporter() {
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t HttpExporter::port() const { return impl_->bound_port; }

void HttpExporter::add_handler(const std::string& path, HttpHandler handler) {
  impl_->router.set(path, std::move(handler));
}

}  // namespace torus::metrics
