#include "operator/kube/client.h"

#include <thread>
#include <utility>

#include "common/log/log.h"

namespace torus::kube {

namespace resources {
const Resource kPods{"", "v1", "pods", "Pod", Scope::kNamespaced};
const Resource kServices{"", "v1", "services", "Service", Scope::kNamespaced};
const Resource kConfigMaps{"", "v1", "configmaps", "ConfigMap", Scope::kNamespaced};
const Resource kPersistentVolumeClaims{"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim",
                                      Scope::kNamespaced};
const Resource kNodes{"", "v1", "nodes", "Node", Scope::kCluster};
const Resource kSecrets{"", "v1", "secrets", "Secret", Scope::kNamespaced};
const Resource kEvents{"", "v1", "events", "Event", Scope::kNamespaced};
const Resource kLeases{"coordination.k8s.io", "v1", "leases", "Lease", Scope::kNamespaced};
const Resource kTrainingJobs{"torus.dev", "v1alpha1", "trainingjobs", "TrainingJob", Scope::kNamespaced};
const Resource kCoschedulingPodGroups{"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", Scope::kNamespaced};
const Resource kVolcanoPodGroups{"scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", Scope::kNamespaced};
}  // namespace resources

std::string Resource::collection_path(const std::string& ns) const {
  std::string base = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
  if (scope == Scope::kNamespaced && !ns.empty()) base += "/namespaces/" + url_escape(ns);
  return base + "/" + plural;
}

std::string Resource::object_path(const std::string& ns, const std::string& name) const {
  return collection_path(ns) + "/" + url_escape(name);
}

std::string url_escape(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string object_key(const json& object) {
  const json& md = object.at("metadata");
  std::string ns = md.value("namespace", "");
  return ns.empty() ? md.value("name", "") : ns + "/" + md.value("name", "");
}

namespace {

bool retryable_status(int status) { return status == 429 || (status >= 500 && status != 501); }

std::string query_string(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string q;
  for (const auto& [k, v] : params) {
    if (v.empty()) continue;
    q += (q.empty() ? "?" : "&") + k + "=" + url_escape(v);
  }
  return q;
}

ApiError api_error(const HttpRequest& request, const HttpResponse& response) {
  auto status = json::parse(response.body, nullptr, false);
  std::string reason = "Unknown";
  std::string message = response.body;
  std::string server_message;
  if (status.is_object()) {
    reason = status.value("reason", reason);
    message = server_message = status.value("message", message);
  }
  return ApiError(
      response.status, reason,
      request.method + " " + request.path + ": " + std::to_string(response.status) + " " + reason + ": " + message,
      server_message);
}

const char* propagation_name(Propagation p) {
  switch (p) {
    case Propagation::kBackground:
      return "Background";
    case Propagation::kForeground:
      return "Foreground";
    case Propagation::kOrphan:
      return "Orphan";
  }
  return "Background";
}

}  // namespace

Client::Client(const ClusterConfig& config, const ClientOptions& options)
    : Client(TransportFactory([timeout = options.timeout](const ClusterConfig& c) -> std::shared_ptr<Transport> {
               return make_http_transport(c, TransportOptions{timeout});
             }),
             config, options) {}

Client::Client(std::unique_ptr<Transport> transport, const ClusterConfig& config, const ClientOptions& options)
    : Client(TransportFactory(
                 [shared = std::shared_ptr<Transport>(std::move(transport))](const ClusterConfig&) { return shared; }),
             config, options) {}

Client::Client(TransportFactory make_transport, const ClusterConfig& config, const ClientOptions& options)
    : config_(config), options_(options), make_transport_(std::move(make_transport)) {
  if (options.qps > 0) bucket_.emplace(options.qps, options.burst);
  token_ = config_.bearer_token;
  // A kubeconfig's own token or certificate wins over its exec plugin (client-go's order).
  if (config_.exec && token_.empty() && config_.client_cert_pem.empty()) refresh_credentials();
  std::lock_guard lock(token_mu_);
  if (!transport_) transport_ = make_transport_(config_);
}

void Client::refresh_credentials() {
  std::lock_guard refreshing(refresh_mu_);
  renew_credentials();
}

void Client::renew_credentials() {
  if (config_.exec) {
    ExecCredential fresh = run_exec_plugin(*config_.exec);
    std::shared_ptr<Transport> replaced;
    std::lock_guard lock(token_mu_);
    token_ = fresh.token;
    token_expiry_ = fresh.expires;
    if (!fresh.client_cert_pem.empty() && (fresh.client_cert_pem != exec_cert_pem_ || !transport_)) {
      ClusterConfig identity = config_;
      identity.client_cert_pem = fresh.client_cert_pem;
      identity.client_key_pem = fresh.client_key_pem;
      exec_cert_pem_ = fresh.client_cert_pem;
      replaced = std::exchange(transport_, make_transport_(identity));  // in-flight requests keep the old one
    }
  } else if (!config_.token_file.empty()) {
    std::string fresh = read_token_file(config_.token_file);
    std::lock_guard lock(token_mu_);
    token_ = fresh;
  }
}

bool Client::credential_expired() {
  std::lock_guard lock(token_mu_);
  return token_expiry_ && std::chrono::system_clock::now() >= *token_expiry_;
}

void Client::refresh_if_expired() {
  if (!credential_expired()) return;
  std::lock_guard refreshing(refresh_mu_);
  if (credential_expired()) renew_credentials();  // unless another thread renewed it while this one waited
}

std::shared_ptr<Transport> Client::transport() {
  std::lock_guard lock(token_mu_);
  return transport_;
}

void Client::authorize(HttpRequest& request) {
  request.headers.emplace_back("User-Agent", options_.user_agent);
  request.headers.emplace_back("Accept", "application/json");
  std::lock_guard lock(token_mu_);
  if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
}

HttpResponse Client::call(HttpRequest request) {
  refresh_if_expired();
  HttpRequest original = request;
  authorize(request);
  bool refreshed = false;
  for (int attempt = 0;; ++attempt) {
    if (bucket_) bucket_->acquire();
    ++requests_;
    std::optional<HttpResponse> response;
    std::string failure;
    try {
      response = transport()->send(request);
    } catch (const ConnectionError& e) {
      failure = e.what();  // retried below like a 5xx
    }
    if (options_.on_request) options_.on_request(request.method, response ? response->status : 0);
    if (response && response->status == 401 && !refreshed && (config_.exec || !config_.token_file.empty())) {
      refresh_credentials();  // rotated service-account token or expired exec credential
      refreshed = true;
      request = original;
      authorize(request);
      continue;
    }
    if (response && !retryable_status(response->status)) return *response;
    if (attempt >= options_.max_retries) {
      if (response) return *response;
      throw ConnectionError(failure);
    }
    Duration wait = backoff_delay(options_.retry_base, options_.retry_cap, attempt);
    if (response) {
      if (auto ra = parse_retry_after(response->retry_after)) wait = std::min<Duration>(*ra, options_.retry_cap * 6);
    }
    TLOG(Debug) << request.method << " " << request.path << ": "
                << (response ? std::to_string(response->status) : failure) << "; retry " << attempt + 1 << " in "
                << std::chrono::duration_cast<std::chrono::milliseconds>(wait).count() << " ms";
    std::this_thread::sleep_for(wait);
  }
}

json Client::call_json(HttpRequest request) {
  HttpResponse response = call(request);
  if (response.status / 100 != 2) throw api_error(request, response);
  if (response.body.empty()) return json::object();
  auto doc = json::parse(response.body, nullptr, false);
  if (doc.is_discarded()) {
    throw CorruptData(request.method + " " + request.path + ": the API server answered with invalid JSON");
  }
  return doc;
}

json Client::get(const Resource& r, const std::string& ns, const std::string& name) {
  return call_json({"GET", r.object_path(ns, name), "", "application/json", {}});
}

std::optional<json> Client::try_get(const Resource& r, const std::string& ns, const std::string& name) {
  HttpRequest request{"GET", r.object_path(ns, name), "", "application/json", {}};
  HttpResponse response = call(request);
  if (response.status == 404) return std::nullopt;
  if (response.status / 100 != 2) throw api_error(request, response);
  return json::parse(response.body);
}

json Client::list(const Resource& r, const std::string& ns, const ListOptions& options) {
  std::string q = query_string({{"labelSelector", options.label_selector},
                                {"fieldSelector", options.field_selector},
                                {"resourceVersion", options.resource_version},
                                {"limit", options.limit > 0 ? std::to_string(options.limit) : ""}});
  return call_json({"GET", r.collection_path(ns) + q, "", "application/json", {}});
}

std::string Client::create_body(const Resource& r, const json& object) {
  const std::string api_version = r.api_version();
  auto has = [&](const char* key, const std::string& value) {
    auto it = object.find(key);
    return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == value;
  };
  if (object.is_object() && has("apiVersion", api_version) && has("kind", r.kind)) return object.dump();
  json body = object;
  body["apiVersion"] = api_version;
  body["kind"] = r.kind;
  return body.dump();
}

json Client::create(const Resource& r, const std::string& ns, const json& object) {
  return call_json({"POST", r.collection_path(ns), create_body(r, object), "application/json", {}});
}

void Client::create_unread(const Resource& r, const std::string& ns, const json& object) {
  HttpRequest request{"POST", r.collection_path(ns), create_body(r, object), "application/json", {}};
  HttpResponse response = call(request);
  if (response.status / 100 != 2) throw api_error(request, response);
}

json Client::update(const Resource& r, const std::string& ns, const json& object, Subresource sub) {
  std::string path = r.object_path(ns, object.at("metadata").at("name").get<std::string>());
  if (sub == Subresource::kStatus) path += "/status";
  return call_json({"PUT", path, object.dump(), "application/json", {}});
}

json Client::merge_patch(const Resource& r, const std::string& ns, const std::string& name, const json& patch,
                         Subresource sub) {
  std::string path = r.object_path(ns, name);
  if (sub == Subresource::kStatus) path += "/status";
  return call_json({"PATCH", path, patch.dump(), "application/merge-patch+json", {}});
}

bool Client::remove(const Resource& r, const std::string& ns, const std::string& name, Propagation propagation) {
  json options = {
      {"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", propagation_name(propagation)}};
  HttpRequest request{"DELETE", r.object_path(ns, name), options.dump(), "application/json", {}};
  HttpResponse response = call(request);
  if (response.status == 404) return false;
  if (response.status / 100 != 2) throw api_error(request, response);
  return true;
}

WatchEnd Client::watch(const Resource& r, const std::string& ns, const WatchOptions& options,
                       const std::function<void(WatchEvent&)>& on_event, StreamCancel& cancel) {
  std::string q = query_string({{"watch", "1"},
                                {"allowWatchBookmarks", "true"},
                                {"labelSelector", options.label_selector},
                                {"resourceVersion", options.resource_version},
                                {"timeoutSeconds", std::to_string(options.timeout.count())}});
  HttpRequest request{"GET", r.collection_path(ns) + q, "", "application/json", {}};
  refresh_if_expired();
  authorize(request);
  if (bucket_) bucket_->acquire();
  ++requests_;
  WatchEnd end = WatchEnd::kClosed;
  StreamCancel local;
  auto on_line = [&](std::string_view line) {
    json doc = options.fields ? options.fields->parse_event(line) : json::parse(line, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      throw CorruptData("watch " + r.plural + ": invalid JSON event line");
    }
    WatchEvent ev{doc.value("type", ""), json::object()};
    if (auto object = doc.find("object"); object != doc.end()) ev.object = std::move(*object);  // not copied
    if (ev.type == "ERROR") {
      // A Status object: 410 means our resourceVersion was compacted away.
      if (ev.object.value("code", 0) == 410) {
        end = WatchEnd::kExpired;
        local.cancel();
        return;
      }
      throw ApiError(ev.object.value("code", 500), ev.object.value("reason", "Unknown"),
                     "watch " + r.plural + ": " + ev.object.value("message", std::string("error event")));
    }
    on_event(ev);
  };
  // The stream has its own cancel (`local`), so that a 410 can end it without cancelling the caller's for good.
  cancel.set_abort([&local] { local.cancel(); });
  struct ClearAbort {
    StreamCancel& c;
    ~ClearAbort() { c.clear_abort(); }
  } clear{cancel};
  HttpResponse response = transport()->stream(request, on_line, local, options.timeout + std::chrono::seconds(30));
  if (end == WatchEnd::kExpired) return end;
  if (response.status == 499 || cancel.cancelled()) return WatchEnd::kCancelled;
  if (response.status == 410) return WatchEnd::kExpired;
  if (response.status / 100 != 2) throw api_error(request, response);
  return WatchEnd::kClosed;
}

}  // namespace torus::kube
