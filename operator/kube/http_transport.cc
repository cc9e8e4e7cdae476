// The one translation unit that includes cpprestsdk (see transport.h).
#include <cpprest/http_client.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl.hpp>

#include "common/util/destination.h"
#include "operator/kube/transport.h"

namespace torus::kube {

void StreamCancel::cancel() {
  std::function<void()> abort;
  {
    std::lock_guard lock(mu_);
    state_ = State::kCancelled;
    abort = abort_;
  }
  if (abort) abort();
}

bool StreamCancel::cancelled() const {
  std::lock_guard lock(mu_);
  return state_ == State::kCancelled;
}

void StreamCancel::set_abort(std::function<void()> abort) {
  bool already = false;
  {
    std::lock_guard lock(mu_);
    abort_ = abort;
    already = state_ == State::kCancelled;
  }
  if (already) abort();
}

void StreamCancel::clear_abort() {
  std::lock_guard lock(mu_);
  abort_ = nullptr;
}

namespace {

namespace http = web::http;
namespace client = web::http::client;

// cpprestsdk reports every failed handshake as "Error in SSL handshake". OpenSSL knows why a server certificate
// was refused; this keeps its reason so the error can say "unable to get local issuer certificate" (a wrong
// certificate-authority) or that the certificate does not name the server.
class TlsDiagnosis {
 public:
  static int verify(X509_STORE_CTX* store, void* self) {
    const int ok = X509_verify_cert(store);  // runs cpprestsdk's own callback (host name check) as before
    if (ok > 0) {
      static_cast<TlsDiagnosis*>(self)->record("");  // a later failure must not be explained by an old reason
    } else {
      const int error = X509_STORE_CTX_get_error(store);
      // OpenSSL found the chain good but the host name check (cpprestsdk's callback) said no: "unspecified".
      const bool host_mismatch = error == X509_V_OK || error == X509_V_ERR_UNSPECIFIED;
      static_cast<TlsDiagnosis*>(self)->record(host_mismatch ? "the server certificate does not name this host"
                                                             : std::string("server certificate rejected: ") +
                                                                   X509_verify_cert_error_string(error));
    }
    return ok;
  }
  void record(std::string reason) {
    std::lock_guard lock(mu_);
    last_ = std::move(reason);
  }
  std::string last() const {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  mutable std::mutex mu_;
  std::string last_;
};

class CppRestTransport : public Transport {
 public:
  CppRestTransport(const ClusterConfig& config, const TransportOptions& options)
      : config_(config),
        tls_diagnosis_(std::make_shared<TlsDiagnosis>()),
        client_(config.server, client_config(options.timeout)) {}

  HttpResponse send(const HttpRequest& request) override {
    try {
      http::http_response resp = client_.request(to_cpprest(request)).get();
      HttpResponse out = head_of(resp);
      out.body = resp.extract_utf8string(true).get();
      return out;
    } catch (const std::exception& e) {
      throw connection_error(request, e);
    }
  }

  HttpResponse stream(const HttpRequest& request, const LineHandler& on_line, StreamCancel& cancel,
                      std::chrono::seconds timeout) override {
    pplx::cancellation_token_source cts;
    cancel.set_abort([cts] { cts.cancel(); });
    struct ClearAbort {
      StreamCancel& c;
      ~ClearAbort() { c.clear_abort(); }
    } clear{cancel};
    try {
      // A client per stream: its timeout (which restarts on every chunk) must outlast the watch's idle gaps.
      client::http_client streaming(config_.server, client_config(timeout));
      http::http_response resp = streaming.request(to_cpprest(request), cts.get_token()).get();
      HttpResponse out = head_of(resp);
      if (out.status / 100 != 2) {
        out.body = resp.extract_utf8string(true).get();
        return out;
      }
      read_lines(resp.body(), on_line, cts);
      return out;
    } catch (const torus::Error&) {
      throw;  // raised by on_line: the caller's own error, not the connection's
    } catch (const std::exception& e) {
      if (cancel.cancelled()) return HttpResponse{499, "", ""};
      throw connection_error(request, e);
    }
  }

 private:
  ConnectionError connection_error(const HttpRequest& request, const std::exception& e) const {
    std::string message = request.method + " " + config_.server + request.path + ": " + e.what();
    if (std::string_view(e.what()).find("handshake") != std::string_view::npos) {
      if (std::string reason = tls_diagnosis_->last(); !reason.empty()) message += " (" + reason + ")";
    }
    return ConnectionError(message);
  }

  // Hands each non-empty line (without its "\n" or "\r\n") to `on_line`. Reads what has arrived in one piece (a
  // wait for the first byte, then all that is buffered behind it) and splits it here: istream::read_line takes one
  // task per byte, which was a tenth of the operator's CPU time under a burst of watch events.
  static void read_lines(concurrency::streams::istream body, const LineHandler& on_line,
                         const pplx::cancellation_token_source& cts) {
    using Buffer = concurrency::streams::streambuf<uint8_t>;
    Buffer buf = body.streambuf();
    std::string pending;
    std::vector<uint8_t> chunk(64 * 1024);
    auto emit = [&](std::string_view line) {
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) on_line(line);
    };
    for (;;) {
      const Buffer::int_type first = buf.bumpc().get();  // waits for the next byte, or the end of the stream
      if (cts.get_token().is_canceled()) return;
      if (first == Buffer::traits::eof()) {
        emit(pending);
        return;
      }
      pending.push_back(static_cast<char>(first));
      if (const size_t ready = std::min(buf.in_avail(), chunk.size()); ready > 0) {
        const size_t n = buf.getn(chunk.data(), ready).get();  // already buffered: does not wait
        pending.append(reinterpret_cast<const char*>(chunk.data()), n);
      }
      size_t start = 0;
      for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', start)) {
        emit(std::string_view(pending).substr(start, nl - start));
        start = nl + 1;
      }
      pending.erase(0, start);
    }
  }

  client::http_client_config client_config(std::chrono::seconds timeout) const {
    client::http_client_config cfg;
    cfg.set_timeout(timeout);
    if (config_.tls_verify == TlsVerify::kInsecureSkip) cfg.set_validate_certificates(false);
    ClusterConfig tls = config_;
    cfg.set_ssl_context_callback([tls, diagnosis = tls_diagnosis_](boost::asio::ssl::context& ctx) {
      SSL_CTX_set_cert_verify_callback(ctx.native_handle(), &TlsDiagnosis::verify, diagnosis.get());
      if (!tls.ca_pem.empty()) ctx.add_certificate_authority(boost::asio::buffer(tls.ca_pem));
      if (!tls.client_cert_pem.empty()) ctx.use_certificate_chain(boost::asio::buffer(tls.client_cert_pem));
      if (!tls.client_key_pem.empty()) {
        ctx.use_private_key(boost::asio::buffer(tls.client_key_pem), boost::asio::ssl::context::pem);
      }
    });
    return cfg;
  }

  static http::http_request to_cpprest(const HttpRequest& request) {
    http::http_request req(request.method);
    req.set_request_uri(request.path);
    for (const auto& [k, v] : request.headers) req.headers().add(k, v);
    if (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
      req.set_body(request.body, request.content_type);
    }
    return req;
  }

  static HttpResponse head_of(const http::http_response& resp) {
    HttpResponse out;
    out.status = resp.status_code();
    auto it = resp.headers().find("Retry-After");
    if (it != resp.headers().end()) out.retry_after = it->second;
    return out;
  }

  ClusterConfig config_;
  std::shared_ptr<TlsDiagnosis> tls_diagnosis_;  // shared with the TLS contexts, which may outlive a request
  client::http_client client_;
};

}  // namespace

std::unique_ptr<Transport> make_http_transport(const ClusterConfig& config, const TransportOptions& options) {
  if (config.server.rfind("http://", 0) != 0 && config.server.rfind("https://", 0) != 0) {
    throw InvalidArgument("cluster server: must be an http:// or https:// URL, got '" + config.server + "'");
  }
  net::check_destination(web::uri(utility::conversions::to_string_t(config.server)).host(), config.server);
  return std::make_unique<CppRestTransport>(config, options);
}

}  // namespace torus::kube
