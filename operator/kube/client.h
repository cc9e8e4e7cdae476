#pragma once
// A small typed Kubernetes client on nlohmann::json objects: get/list/create/update/merge-patch/delete, the
// status subresource, and watches; with a client-side rate limit (QPS + burst) and retries with backoff on
// 429, 5xx and connection errors, honouring Retry-After.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/util/error.h"
#include "operator/kube/config.h"
#include "operator/kube/field_filter.h"
#include "operator/kube/rate_limit.h"
#include "operator/kube/transport.h"

namespace torus::kube {

using json = nlohmann::json;

enum class Scope { kNamespaced, kCluster };

// One API resource, e.g. {"", "v1", "pods", "Pod"} or {"torus.dev", "v1alpha1", "trainingjobs", "TrainingJob"}.
struct Resource {
  std::string group;
  std::string version;
  std::string plural;
  std::string kind;
  Scope scope = Scope::kNamespaced;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // The collection path; `ns` empty means all namespaces.
  std::string collection_path(const std::string& ns) const;
  std::string object_path(const std::string& ns, const std::string& name) const;
};

namespace resources {
extern const Resource kPods;
extern const Resource kServices;
extern const Resource kConfigMaps;
extern const Resource kNodes;
extern const Resource kSecrets;
extern const Resource kPersistentVolumeClaims;
extern const Resource kEvents;
extern const Resource kLeases;
extern const Resource kTrainingJobs;
// Gang scheduling: the coscheduling plugin's PodGroup (kubernetes-sigs/scheduler-plugins) and Volcano's.
extern const Resource kCoschedulingPodGroups;
extern const Resource kVolcanoPodGroups;
}  // namespace resources

// The API server answered with an error status (404, 409, 410, 422...). `reason` is the Status reason.
class ApiError : public Error {
 public:
  ApiError(int status, std::string reason, const std::string& message, std::string server_message = "")
      : Error(message), status_(status), reason_(std::move(reason)), server_message_(std::move(server_message)) {}
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }
  // The Status's message as the API server wrote it (`pods "x" is forbidden: ...`), without the request; empty
  // when the answer carried no Status.
  const std::string& server_message() const { return server_message_; }
  bool not_found() const { return status_ == 404; }
  bool conflict() const { return status_ == 409 && reason_ != "AlreadyExists"; }
  bool already_exists() const { return status_ == 409 && reason_ == "AlreadyExists"; }
  bool gone() const { return status_ == 410; }

 private:
  int status_;
  std::string reason_;
  std::string server_message_;
};

struct ClientOptions {
  double qps = 20.0;  // <= 0: no client-side limit (`torus operator`'s default: the server's APF protects it)
  int burst = 30;
  int max_retries = 6;
  Duration retry_base = std::chrono::milliseconds(50);
  Duration retry_cap = std::chrono::seconds(5);
  std::chrono::seconds timeout{30};
  std::string user_agent = "torus-operator";
  // Called after every request on the wire: verb (GET/POST/...) and HTTP status, 0 for a transport failure.
  std::function<void(const std::string& verb, int status)> on_request;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" = most recent (quorum read)
  int64_t limit = 0;             // > 0: at most this many items (a probe; the rest is behind metadata.continue)
};

enum class Subresource { kNone, kStatus };
enum class Propagation { kBackground, kForeground, kOrphan };

struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  json object;
};

// Why a watch returned.
enum class WatchEnd {
  kClosed,     // the server ended it (timeoutSeconds) or the idle timeout passed: re-watch from the last RV
  kExpired,    // 410 Gone / "too old resource version": relist
  kCancelled,  // StreamCancel fired
};

struct WatchOptions {
  std::string label_selector;
  std::string resource_version;
  std::chrono::seconds timeout{300};  // server-side timeoutSeconds; the client idle timeout is set above it
  const FieldFilter* fields = nullptr;  // applied while each event is parsed; null: every field is kept
};

class Client {
 public:
  Client(const ClusterConfig& config, const ClientOptions& options);
  // For tests: any transport.
  Client(std::unique_ptr<Transport> transport, const ClusterConfig& config, const ClientOptions& options);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  json get(const Resource& r, const std::string& ns, const std::string& name);
  // nullopt on 404.
  std::optional<json> try_get(const Resource& r, const std::string& ns, const std::string& name);
  json list(const Resource& r, const std::string& ns, const ListOptions& options = {});
  json create(const Resource& r, const std::string& ns, const json& object);
  // The same, for a caller that does not read the created object: the answer's body is not parsed (a pod's is a few
  // KiB: parsing it was a tenth of the operator's time to create a job's children). Throws as create() does.
  void create_unread(const Resource& r, const std::string& ns, const json& object);
  // PUT of `object` (named by its metadata.name); 409 Conflict when its resourceVersion is stale.
  json update(const Resource& r, const std::string& ns, const json& object, Subresource sub = Subresource::kNone);
  json merge_patch(const Resource& r, const std::string& ns, const std::string& name, const json& patch,
                   Subresource sub = Subresource::kNone);
  // 404 is not an error (already gone). Returns true when this call deleted it.
  bool remove(const Resource& r, const std::string& ns, const std::string& name,
              Propagation propagation = Propagation::kBackground);
  // Streams events to `on_event` until the watch ends; throws ApiError / ConnectionError on failure. The handler
  // may take the event's object (move it out).
  WatchEnd watch(const Resource& r, const std::string& ns, const WatchOptions& options,
                 const std::function<void(WatchEvent&)>& on_event, StreamCancel& cancel);

  // Requests sent on the wire (retries included), for the benchmark and metrics.
  uint64_t requests_sent() const { return requests_.load(); }
  const ClusterConfig& config() const { return config_; }

 private:
  using TransportFactory = std::function<std::shared_ptr<Transport>(const ClusterConfig&)>;
  Client(TransportFactory make_transport, const ClusterConfig& config, const ClientOptions& options);

  HttpResponse call(HttpRequest request);
  // The POST body of `object` as resource `r`: its apiVersion and kind set (copied only when they are not yet).
  static std::string create_body(const Resource& r, const json& object);
  json call_json(HttpRequest request);
  void authorize(HttpRequest& request);
  std::shared_ptr<Transport> transport();
  // Re-reads the token file or re-runs the exec plugin; a new client certificate from the plugin means a new
  // transport (TLS identity is per connection).
  void refresh_credentials();
  // Before a request: an exec credential past its expirationTimestamp is renewed, as client-go does.
  void refresh_if_expired();
  bool credential_expired();
  void renew_credentials();  // with refresh_mu_ held

  ClusterConfig config_;
  ClientOptions options_;
  TransportFactory make_transport_;
  std::optional<TokenBucket> bucket_;  // none when options.qps <= 0
  std::atomic<uint64_t> requests_{0};
  std::mutex refresh_mu_;  // one refresh at a time; taken before token_mu_
  std::mutex token_mu_;    // guards the credentials and the transport below
  std::string token_;
  std::string exec_cert_pem_;
  std::optional<std::chrono::system_clock::time_point> token_expiry_;
  std::shared_ptr<Transport> transport_;
};

// URL query escaping for label selectors and resource names.
std::string url_escape(const std::string& text);
// "ns/name" for namespaced objects, "name" otherwise.
std::string object_key(const json& object);

}  // namespace torus::kube
