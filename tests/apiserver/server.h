#pragma once
// The Kubernetes API stand-in: an HTTP/1.1 server (Boost.Beast, one thread per connection so watches can block)
// over the Store, serving discovery, OpenAPI v3, CRUD, list, watch, patch, the status and binding subresources,
// Tables for kubectl, and a control API for tests:
//   POST   /_standin/faults   {"action":"fail"|"delay"|"conflict"|"clear"|"dropWatches"|"compact", ...}
//   GET    /_standin/stats    request counters by verb and resource, current resourceVersion, open watches
//   DELETE /_standin/stats    resets the counters
//   POST   /_standin/auth     {"tokens": [...]} replaces the bearer tokens the authenticator accepts (rotation)
// With authentication, requests are authorized as the apiserver's RBAC authorizer does (rbac.h): admin tokens and
// certificates in system:masters may do anything, a service account's token (TokenRequest, `kubectl create token`)
// what the stored Roles, ClusterRoles and bindings grant it.
//   POST   /_standin/kubelet  forwarded to the simulated kubelet when one is attached (see kubelet_sim.h)
// See docs/testing.md for the full description.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "tests/apiserver/faults.h"
#include "tests/apiserver/rbac.h"
#include "tests/apiserver/store.h"
#include "tests/apiserver/tls.h"

namespace torus::standin {

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  StoreOptions store;
  // Watches without timeoutSeconds end after this (the apiserver picks 30-60 min).
  std::chrono::seconds default_watch_timeout{1800};
  // HTTPS with this material, as every real apiserver serves; plain HTTP when absent.
  std::optional<TlsMaterial> tls;
  // kRequired: like an apiserver without anonymous access, every request but /healthz, /livez, /readyz, /version
  // and the control API needs a bearer token from `tokens` or a client certificate the TLS CA signed, else 401.
  enum class Authentication { kNone, kRequired } authentication = Authentication::kNone;
  std::set<std::string> tokens{"standin-token"};
};

class ApiServer {
 public:
  using ControlHandler = std::function<nlohmann::json(const nlohmann::json&)>;

  explicit ApiServer(ServerOptions options = {});
  ~ApiServer();  // stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds and starts accepting. Throws SystemError when the address cannot be bound.
  void start();
  // Ends every watch and connection and joins their threads. Idempotent; never throws.
  void stop() noexcept;

  uint16_t port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT", or https:// with TLS
  // Writes a kubeconfig whose current context points at this server (trusting its CA, with TLS) and authenticates
  // with the first bearer token; returns `path`.
  std::string write_kubeconfig(const std::string& path, const std::string& ns = "default") const;
  // Replaces the bearer tokens the authenticator accepts (a rotated service-account token, an expired credential).
  void set_tokens(std::set<std::string> tokens);
  // A bearer token of the service account `ns`/`name`, as the TokenRequest API (`kubectl create token NAME`) mints
  // one: its requests are authorized by the stored RBAC objects; it authenticates while the account exists.
  // Throws ApiError 404 when the account does not exist.
  std::string mint_service_account_token(const std::string& ns, const std::string& name);

  Store& store() { return store_; }
  Faults& faults() { return faults_; }
  int open_watches() const { return open_watches_.load(); }
  int open_connections() const;

  // Registers the handler of POST /_standin/<name> (the kubelet simulation registers "kubelet").
  void set_control_handler(const std::string& name, ControlHandler handler);

 private:
  struct Connection;
  void accept_loop();
  void serve(Connection& connection);
  void reap_finished();
  bool handshake(Connection& connection);
  bool token_accepted(const std::string& token) const;
  // The user of a bearer token: an admin (system:masters) or a live service account; nullopt when unknown.
  std::optional<UserInfo> token_user(const std::string& token);
  RbacObjects rbac_objects() const;
  struct TlsContext;
  static std::unique_ptr<TlsContext> make_tls_context(const TlsMaterial& tls);
  bool wait_or_stop(std::chrono::milliseconds delay);

  ServerOptions options_;
  Store store_;
  Faults faults_;
  uint16_t port_ = 0;
  struct Acceptor;
  std::unique_ptr<Acceptor> acceptor_;
  std::thread accept_thread_;
  mutable std::mutex connections_mutex_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::mutex control_mutex_;
  std::map<std::string, ControlHandler> control_handlers_;
  std::atomic<int> open_watches_{0};
  mutable std::mutex tokens_mutex_;
  std::map<std::string, std::pair<std::string, std::string>> service_account_tokens_;  // token -> (ns, name)
  std::unique_ptr<TlsContext> tls_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;

  friend class RequestHandler;
};

}  // namespace torus::standin
