#include "tests/apiserver/server.h"

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fstream>

#include "common/log/log.h"
#include "common/util/base64.h"
#include "common/util/error.h"
#include "common/util/random.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/connection.h"
#include "tests/apiserver/request_handler.h"

namespace torus::standin {

struct ApiServer::Acceptor {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

struct ApiServer::TlsContext {
  asio::ssl::context context{asio::ssl::context::tls_server};
};

// ---------------------------------------------------------------------------------------------------------------
// ApiServer

namespace {
// Over TLS every namespace publishes the CA (ConfigMap kube-root-ca.crt), as kube-controller-manager does.
StoreOptions store_options(const ServerOptions& options) {
  StoreOptions store = options.store;
  if (options.tls && store.root_ca_pem.empty()) store.root_ca_pem = options.tls->ca_cert_pem;
  return store;
}
}  // namespace

ApiServer::ApiServer(ServerOptions options) : options_(std::move(options)), store_(store_options(options_)) {
  if (options_.tls) tls_ = make_tls_context(*options_.tls);
  set_control_handler("auth", [this](const json& body) {
    std::set<std::string> tokens;
    for (const auto& t : body.value("tokens", json::array())) tokens.insert(t.get<std::string>());
    set_tokens(tokens);
    return make_status(200, "", "accepting " + std::to_string(tokens.size()) + " token(s)");
  });
}

std::unique_ptr<ApiServer::TlsContext> ApiServer::make_tls_context(const TlsMaterial& tls) {
  auto made = std::make_unique<TlsContext>();
  asio::ssl::context& c = made->context;
  c.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  c.use_certificate_chain(asio::buffer(tls.server_cert_pem));
  c.use_private_key(asio::buffer(tls.server_key_pem), asio::ssl::context::pem);
  c.add_certificate_authority(asio::buffer(tls.ca_cert_pem));
  // Ask for a client certificate but do not demand one: bearer tokens are the other way in, as on an apiserver.
  c.set_verify_mode(asio::ssl::verify_peer);
  c.set_verify_callback([](bool, asio::ssl::verify_context&) { return true; });  // the verdict is read after
  return made;
}

void ApiServer::set_tokens(std::set<std::string> tokens) {
  std::lock_guard lock(tokens_mutex_);
  options_.tokens = std::move(tokens);
}

bool ApiServer::token_accepted(const std::string& token) const {
  std::lock_guard lock(tokens_mutex_);
  return options_.tokens.count(token) > 0;
}

std::string ApiServer::mint_service_account_token(const std::string& ns, const std::string& name) {
  store_.get(*store_.registry().find("", "v1", "serviceaccounts"), ns, name);  // 404 when missing
  std::string token = "sa-" + random_hex(24);
  std::lock_guard lock(tokens_mutex_);
  service_account_tokens_[token] = {ns, name};
  return token;
}

std::optional<UserInfo> ApiServer::token_user(const std::string& token) {
  std::pair<std::string, std::string> account;
  {
    std::lock_guard lock(tokens_mutex_);
    if (options_.tokens.count(token) > 0) return UserInfo{"standin-admin", {"system:masters", "system:authenticated"}};
    auto it = service_account_tokens_.find(token);
    if (it == service_account_tokens_.end()) return std::nullopt;
    account = it->second;
  }
  // A service account's token stops authenticating once the account is deleted.
  try {
    store_.get(*store_.registry().find("", "v1", "serviceaccounts"), account.first, account.second);
  } catch (const ApiError&) {
    return std::nullopt;
  }
  return service_account_user(account.first, account.second);
}

RbacObjects ApiServer::rbac_objects() const {
  auto all = [&](const char* plural) {
    std::vector<json> out;
    ResourcePtr type = store_.registry().find("rbac.authorization.k8s.io", "v1", plural);
    if (!type) return out;
    for (const ObjectPtr& o : store_.list(*type, "").items) out.push_back(*o);
    return out;
  };
  return {all("roles"), all("clusterroles"), all("rolebindings"), all("clusterrolebindings")};
}

ApiServer::~ApiServer() { stop(); }

std::string ApiServer::url() const {
  return (tls_ ? "https://" : "http://") + options_.address + ":" + std::to_string(port_);
}

int ApiServer::open_connections() const {
  std::lock_guard lock(connections_mutex_);
  int n = 0;
  for (const auto& c : connections_) n += c->done ? 0 : 1;
  return n;
}

void ApiServer::set_control_handler(const std::string& name, ControlHandler handler) {
  std::lock_guard lock(control_mutex_);
  control_handlers_[name] = std::move(handler);
}

std::string ApiServer::write_kubeconfig(const std::string& path, const std::string& ns) const {
  std::ofstream out(path);
  if (!out) throw_errno("kubeconfig: cannot write " + path);
  std::string token;
  {
    std::lock_guard lock(tokens_mutex_);
    token = options_.tokens.empty() ? "" : *options_.tokens.begin();
  }
  out << "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: " << url() << "\n";
  if (options_.tls) out << "    certificate-authority-data: " << base64_encode(options_.tls->ca_cert_pem) << "\n";
  out << "contexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n    namespace: " << ns
      << "\ncurrent-context: standin\nusers:\n- name: standin\n  user:\n    token: " << (token.empty() ? "none" : token)
      << "\n";
  return path;
}

void ApiServer::start() {
  acceptor_ = std::make_unique<Acceptor>();
  beast::error_code ec;
  tcp::endpoint endpoint(asio::ip::make_address(options_.address, ec), options_.port);
  if (ec) throw InvalidArgument("kube-standin: address \"" + options_.address + "\" is not an IP address");
  tcp::acceptor& a = acceptor_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw SystemError("kube-standin: cannot listen on " + options_.address + ":" + std::to_string(options_.port) +
                      ": " + ec.message());
  port_ = a.local_endpoint().port();
  accept_thread_ = std::thread([this] { accept_loop(); });
}

void ApiServer::accept_loop() {
  while (!stopping_) {
    beast::error_code ec;
    tcp::socket socket(acceptor_->io);
    acceptor_->acceptor.accept(socket, ec);
    if (ec) {
      if (stopping_) return;
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    reap_finished();
    std::lock_guard lock(connections_mutex_);
    auto connection = std::make_unique<Connection>(std::move(socket));
    Connection* raw = connection.get();
    connection->thread = std::thread([this, raw] { serve(*raw); });
    connections_.push_back(std::move(connection));
  }
}

void ApiServer::serve(Connection& connection) {
  if (tls_ && !handshake(connection)) {
    beast::error_code ec;
    connection.socket.shutdown(tcp::socket::shutdown_both, ec);
    connection.done = true;
    return;
  }
  beast::flat_buffer buffer;
  RequestHandler handler(*this, connection);
  while (!stopping_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    beast::error_code ec;
    connection.with_stream([&](auto& stream) { http::read(stream, buffer, parser, ec); });
    if (ec) break;
    Request request = parser.release();
    if (!handler.handle(request)) break;
  }
  beast::error_code ec;
  connection.socket.shutdown(tcp::socket::shutdown_both, ec);
  connection.done = true;
}

bool ApiServer::handshake(Connection& connection) {
  connection.tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(connection.socket, tls_->context);
  beast::error_code ec;
  connection.tls->handshake(asio::ssl::stream_base::server, ec);
  if (ec) {
    TLOG(Debug) << "kube-standin: TLS handshake failed: " << ec.message();
    return false;
  }
  SSL* ssl = connection.tls->native_handle();
  if (X509* peer = SSL_get1_peer_certificate(ssl)) {
    char cn[256] = "";
    X509_NAME* subject = X509_get_subject_name(peer);
    if (SSL_get_verify_result(ssl) == X509_V_OK &&
        X509_NAME_get_text_by_NID(subject, NID_commonName, cn, sizeof(cn)) > 0) {
      connection.certificate_user = cn;
      // The x509 authenticator's groups: every O of the subject.
      for (int at = X509_NAME_get_index_by_NID(subject, NID_organizationName, -1); at >= 0;
           at = X509_NAME_get_index_by_NID(subject, NID_organizationName, at)) {
        ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
        connection.certificate_groups.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)),
                                                   static_cast<size_t>(ASN1_STRING_length(value)));
      }
    }
    X509_free(peer);
  }
  return true;
}

void ApiServer::reap_finished() {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(connections_mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->done) {
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) c->thread.join();
}

bool ApiServer::wait_or_stop(std::chrono::milliseconds delay) {
  std::unique_lock lock(stop_mutex_);
  return !stop_cv_.wait_for(lock, delay, [this] { return stopping_.load(); });
}

void ApiServer::stop() noexcept {
  if (!acceptor_ || stopping_.exchange(true)) return;
  {
    std::lock_guard lock(stop_mutex_);
    stop_cv_.notify_all();
  }
  store_.close();
  // shutdown() wakes a thread blocked in accept() or read(); close() alone would not.
  ::shutdown(acceptor_->acceptor.native_handle(), SHUT_RDWR);
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::unique_ptr<Connection>> all;
  {
    std::lock_guard lock(connections_mutex_);
    for (auto& c : connections_) ::shutdown(c->socket.native_handle(), SHUT_RDWR);
    all.swap(connections_);
  }
  for (auto& c : all) {
    if (c->thread.joinable()) c->thread.join();
  }
  beast::error_code ec;
  acceptor_->acceptor.close(ec);
}

}  // namespace torus::standin
