#include "tests/apiserver/server.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fstream>
#include <map>
#include <optional>

#include "common/log/log.h"
#include "common/util/base64.h"
#include "common/util/error.h"
#include "tests/apiserver/api_error.h"
#include "tests/apiserver/discovery.h"
#include "tests/apiserver/protobuf.h"
#include "tests/apiserver/table.h"

namespace torus::standin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct ApiServer::Acceptor {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

struct ApiServer::TlsContext {
  asio::ssl::context context{asio::ssl::context::tls_server};
};

struct ApiServer::Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)) {}
  // Runs `io` on the connection's byte stream: the TLS stream once handshaken, else the plain socket.
  template <class Io>
  auto with_stream(Io&& io) {
    if (tls) return io(*tls);
    return io(socket);
  }
  tcp::socket socket;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  std::string certificate_user;  // the CN of a client certificate the CA signed, once handshaken
  std::thread thread;
  std::atomic<bool> done{false};
};

namespace {

std::string url_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::map<std::string, std::string> parse_query(const std::string& query) {
  std::map<std::string, std::string> params;
  size_t start = 0;
  while (start < query.size()) {
    size_t amp = query.find('&', start);
    std::string pair = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    size_t eq = pair.find('=');
    if (!pair.empty()) {
      params[url_decode(pair.substr(0, eq))] = eq == std::string::npos ? "" : url_decode(pair.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return params;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string s = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!s.empty()) segments.push_back(s);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return segments;
}

int64_t int_param(const std::map<std::string, std::string>& params, const std::string& name, int64_t fallback) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty()) return fallback;
  if (it->second.find_first_not_of("-0123456789") != std::string::npos) {
    throw bad_request(name + ": must be an integer, got \"" + it->second + "\"");
  }
  return std::stoll(it->second);
}

std::string param(const std::map<std::string, std::string>& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

bool truthy(const std::string& value) { return value == "1" || value == "true" || value == "True"; }

FieldValidation field_validation(const std::string& value) {
  if (value.empty() || value == "Warn") return FieldValidation::kWarn;
  if (value == "Strict") return FieldValidation::kStrict;
  if (value == "Ignore") return FieldValidation::kIgnore;
  throw bad_request("fieldValidation: expected Strict, Warn or Ignore, got \"" + value + "\"");
}

Propagation propagation(const std::string& value) {
  if (value.empty() || value == "Background") return Propagation::kBackground;
  if (value == "Foreground") return Propagation::kForeground;
  if (value == "Orphan") return Propagation::kOrphan;
  throw bad_request("propagationPolicy: expected Background, Foreground or Orphan, got \"" + value + "\"");
}

json parse_body(const std::string& body) {
  if (body.empty()) throw bad_request("the request body is empty");
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    throw bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
}

// Where a request points inside the resource API.
struct Target {
  ResourcePtr type;
  std::string ns;
  std::string name;
  std::string subresource;
};

}  // namespace

// Serves one request on behalf of the server (friend: uses its store, faults and control handlers).
class RequestHandler {
 public:
  RequestHandler(ApiServer& server, ApiServer::Connection& connection) : server_(server), connection_(connection) {}

  // Returns false when the connection must close (a dropped watch, a write failure).
  bool handle(Request& request);

 private:
  Response reply(http::status status, const json& body);
  Response reply_error(const ApiError& error);
  bool send(Response response);
  std::optional<Response> route_special(const std::vector<std::string>& segments);
  std::optional<Target> resolve(const std::vector<std::string>& segments);
  Response serve_resource(const Target& target, bool& streamed);
  Response serve_control(const std::string& name);
  bool serve_watch(const Target& target);
  void require_json_body() const;
  json object_body() const;
  bool write_chunk(const std::string& data);
  void write_last_chunk(beast::error_code& ec);
  std::optional<Response> authenticate(const std::vector<std::string>& segments);
  bool peer_closed();
  RequestInfo describe(const Target& target) const;
  bool wants_table() const {
    return std::string(request_->base()[http::field::accept]).find("as=Table") != std::string::npos;
  }
  TableObjects table_objects() const;
  ListOptions list_options(const Target& target) const;

  ApiServer& server_;
  ApiServer::Connection& connection_;
  Request* request_ = nullptr;
  std::string path_;
  std::map<std::string, std::string> params_;
  std::vector<std::string> warnings_;
};

Response RequestHandler::reply(http::status status, const json& body) {
  Response response{status, request_->version()};
  response.set(http::field::content_type, "application/json");
  response.set(http::field::cache_control, "no-cache, private");
  for (const std::string& w : warnings_) response.insert(http::field::warning, "299 - " + json(w).dump());
  response.keep_alive(request_->keep_alive());
  response.body() = body.dump();
  response.prepare_payload();
  return response;
}

Response RequestHandler::reply_error(const ApiError& error) {
  Response response = reply(static_cast<http::status>(error.code()), error.status());
  if (error.details().retry_after_seconds > 0) {
    response.set(http::field::retry_after, std::to_string(error.details().retry_after_seconds));
  }
  return response;
}

bool RequestHandler::send(Response response) {
  beast::error_code ec;
  bool keep = response.keep_alive();
  connection_.with_stream([&](auto& stream) { http::write(stream, response, ec); });
  return !ec && keep;
}

bool RequestHandler::handle(Request& request) {
  request_ = &request;
  std::string target(request.target());
  size_t question = target.find('?');
  path_ = target.substr(0, question);
  params_ = parse_query(question == std::string::npos ? "" : target.substr(question + 1));
  warnings_.clear();
  std::vector<std::string> segments = split_path(path_);
  try {
    if (auto refused = authenticate(segments)) return send(std::move(*refused));
    if (auto special = route_special(segments)) return send(std::move(*special));
    std::optional<Target> resolved = resolve(segments);
    if (!resolved) {
      return send(reply(http::status::not_found,
                        make_status(404, "NotFound", "the server could not find the requested resource")));
    }
    require_json_body();
    FaultDecision decision = server_.faults_.on_request(describe(*resolved));
    if (decision.delay.count() > 0 && !server_.wait_or_stop(decision.delay)) return false;
    if (decision.error) return send(reply_error(*decision.error));
    bool streamed = false;
    Response response = serve_resource(*resolved, streamed);
    if (streamed) return serve_watch(*resolved);
    return send(std::move(response));
  } catch (const ApiError& e) {
    return send(reply_error(e));
  } catch (const json::exception& e) {
    // A malformed object the handlers did not anticipate (e.g. metadata that is a string): the client's fault.
    return send(reply_error(bad_request(std::string("malformed object: ") + e.what())));
  }
}

// The apiserver's authenticators in order: a bearer token (a wrong one is refused even with a certificate), then
// the client certificate; anonymous requests reach only the public health and version endpoints.
std::optional<Response> RequestHandler::authenticate(const std::vector<std::string>& s) {
  if (server_.options_.authentication == ServerOptions::Authentication::kNone) return std::nullopt;
  if (!s.empty() && s[0] == "_standin") return std::nullopt;  // the tests' control API, not Kubernetes'
  const std::string authorization(request_->base()[http::field::authorization]);
  const std::string kBearer = "Bearer ";
  if (!authorization.empty()) {
    if (authorization.rfind(kBearer, 0) == 0 && server_.token_accepted(authorization.substr(kBearer.size()))) {
      return std::nullopt;
    }
  } else if (!connection_.certificate_user.empty()) {
    return std::nullopt;
  } else if (s.size() == 1 && (s[0] == "healthz" || s[0] == "livez" || s[0] == "readyz" || s[0] == "version")) {
    return std::nullopt;
  }
  return reply(http::status::unauthorized, make_status(401, "Unauthorized", "Unauthorized"));
}

std::optional<Response> RequestHandler::route_special(const std::vector<std::string>& s) {
  const Registry& registry = server_.store_.registry();
  auto found = [&](const json& body) -> Response {
    if (body.is_null()) {
      return reply(http::status::not_found,
                   make_status(404, "NotFound", "the server could not find the requested resource"));
    }
    return reply(http::status::ok, body);
  };
  if (s.empty()) return found(json{{"paths", json::array({"/api", "/api/v1", "/apis", "/openapi/v3", "/version"})}});
  if (s[0] == "version" && s.size() == 1) return found(version_info());
  if ((s[0] == "healthz" || s[0] == "readyz" || s[0] == "livez") && s.size() == 1) {
    Response r{http::status::ok, request_->version()};
    r.set(http::field::content_type, "text/plain");
    r.body() = "ok";
    r.keep_alive(request_->keep_alive());
    r.prepare_payload();
    return r;
  }
  if (s[0] == "api" && s.size() == 1) return found(api_versions());
  if (s[0] == "api" && s.size() == 2) return found(api_resource_list(registry, "", s[1]));
  if (s[0] == "apis" && s.size() == 1) return found(api_group_list(registry));
  if (s[0] == "apis" && s.size() == 2) return found(api_group(registry, s[1]));
  if (s[0] == "apis" && s.size() == 3) return found(api_resource_list(registry, s[1], s[2]));
  if (s[0] == "openapi") {
    if (s.size() == 2 && s[1] == "v3") return found(openapi_v3_root(registry));
    if (s.size() == 4 && s[1] == "v3" && s[2] == "api") return found(openapi_v3_document(registry, "", s[3]));
    if (s.size() == 5 && s[1] == "v3" && s[2] == "apis") return found(openapi_v3_document(registry, s[3], s[4]));
    return found(nullptr);  // no OpenAPI v2: kubectl uses v3
  }
  if (s[0] == "_standin" && s.size() == 2) return serve_control(s[1]);
  return std::nullopt;
}

Response RequestHandler::serve_control(const std::string& name) {
  http::verb verb = request_->method();
  if (name == "stats") {
    if (verb == http::verb::delete_) {
      server_.faults_.reset_counters();
      return reply(http::status::ok, make_status(200, "", "counters reset"));
    }
    json stats = server_.faults_.counters();
    stats["resourceVersion"] = std::to_string(server_.store_.resource_version());
    stats["openWatches"] = server_.open_watches();
    stats["openConnections"] = server_.open_connections();
    return reply(http::status::ok, stats);
  }
  if (verb != http::verb::post) throw method_not_allowed("control endpoints take POST");
  json body = parse_body(request_->body());
  if (name == "faults") {
    std::string action = body.is_object() ? body.value("action", "") : "";
    if (action == "dropWatches") {
      server_.store_.drop_watches();
    } else if (action == "compact") {
      server_.store_.compact();
    } else {
      server_.faults_.arm(body);
    }
    return reply(http::status::ok, make_status(200, "", "fault armed: " + action));
  }
  ApiServer::ControlHandler handler;
  {
    std::lock_guard lock(server_.control_mutex_);
    auto it = server_.control_handlers_.find(name);
    if (it != server_.control_handlers_.end()) handler = it->second;
  }
  if (!handler) throw ApiError(404, "NotFound", "no control endpoint /_standin/" + name);
  return reply(http::status::ok, handler(body));
}

std::optional<Target> RequestHandler::resolve(const std::vector<std::string>& s) {
  std::string group;
  std::string version;
  size_t at = 0;
  if (s.size() >= 3 && s[0] == "api") {
    version = s[1];
    at = 2;
  } else if (s.size() >= 4 && s[0] == "apis") {
    group = s[1];
    version = s[2];
    at = 3;
  } else {
    return std::nullopt;
  }
  const Registry& registry = server_.store_.registry();
  std::vector<std::string> rest(s.begin() + static_cast<long>(at), s.end());
  Target target;
  if (rest.size() >= 3 && rest[0] == "namespaces" && registry.find(group, version, rest[2])) {
    target.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  target.type = registry.find(group, version, rest[0]);
  if (!target.type || rest.size() > 3) return std::nullopt;
  if (rest.size() >= 2) target.name = rest[1];
  if (rest.size() == 3) target.subresource = rest[2];
  if (!target.type->namespaced() && !target.ns.empty()) return std::nullopt;
  if (!target.subresource.empty() && target.subresource != "status" && target.subresource != "binding") {
    return std::nullopt;
  }
  if (target.subresource == "status" && target.type->status != StatusSubresource::kPresent) return std::nullopt;
  if (target.subresource == "binding" && target.type->group_resource() != "pods") return std::nullopt;
  return target;
}

RequestInfo RequestHandler::describe(const Target& target) const {
  RequestInfo info;
  info.resource = target.type->group_resource();
  info.subresource = target.subresource;
  info.ns = target.ns;
  info.name = target.name;
  switch (request_->method()) {
    case http::verb::get:
      info.verb = !target.name.empty() ? "get" : truthy(param(params_, "watch")) ? "watch" : "list";
      break;
    case http::verb::post:
      info.verb = "create";
      break;
    case http::verb::put:
      info.verb = "update";
      break;
    case http::verb::patch:
      info.verb = "patch";
      break;
    case http::verb::delete_:
      info.verb = target.name.empty() ? "deletecollection" : "delete";
      break;
    default:
      info.verb = std::string(request_->method_string());
  }
  return info;
}

TableObjects RequestHandler::table_objects() const {
  std::string include = param(params_, "includeObject");
  if (include == "None") return TableObjects::kNone;
  if (include == "Object") return TableObjects::kFull;
  return TableObjects::kMetadata;
}

ListOptions RequestHandler::list_options(const Target& target) const {
  ListOptions options;
  options.labels = LabelSelector::parse(param(params_, "labelSelector"));
  options.fields =
      FieldSelector::parse(param(params_, "fieldSelector"), supported_fields(target.type->group_resource()));
  options.limit = int_param(params_, "limit", 0);
  options.continue_token = param(params_, "continue");
  return options;
}

Response RequestHandler::serve_resource(const Target& target, bool& streamed) {
  Store& store = server_.store_;
  const ResourceType& type = *target.type;
  Subresource sub = target.subresource == "status" ? Subresource::kStatus : Subresource::kMain;
  WriteOptions write;
  write.validation = field_validation(param(params_, "fieldValidation"));
  write.dry_run = param(params_, "dryRun") == "All" ? DryRun::kAll : DryRun::kNo;
  auto with_warnings = [&](WriteResult result) {
    warnings_ = std::move(result.warnings);
    return Store::as_version(result.object, type);
  };
  switch (request_->method()) {
    case http::verb::get: {
      if (!target.name.empty()) {
        ObjectPtr object = store.get(type, target.ns, target.name);
        if (wants_table()) return reply(http::status::ok, to_table(type, {object}, table_objects()));
        return reply(http::status::ok, *object);
      }
      if (truthy(param(params_, "watch"))) {
        streamed = true;
        return Response{};
      }
      ListResult list = store.list(type, target.ns, list_options(target));
      json metadata = {{"resourceVersion", std::to_string(list.resource_version)}};
      if (!list.continue_token.empty()) {
        metadata["continue"] = list.continue_token;
        metadata["remainingItemCount"] = list.remaining;
      }
      if (wants_table()) {
        json table = to_table(type, list.items, table_objects());
        table["metadata"] = metadata;
        return reply(http::status::ok, table);
      }
      std::string body = "{\"apiVersion\":" + json(type.api_version()).dump() + ",\"items\":[";
      for (size_t i = 0; i < list.items.size(); ++i) {
        if (i > 0) body += ",";
        body += list.items[i]->dump();
      }
      body += "],\"kind\":" + json(type.list_kind).dump() + ",\"metadata\":" + metadata.dump() + "}";
      Response response = reply(http::status::ok, json::object());
      response.body() = std::move(body);
      response.prepare_payload();
      return response;
    }
    case http::verb::post: {
      if (target.subresource == "binding") {
        json binding = parse_body(request_->body());
        std::string node = binding.value("target", json::object()).value("name", "");
        if (node.empty())
          throw invalid("Binding", "", target.name, {{"FieldValueRequired", "Required value", "target.name"}});
        store.bind(target.ns, target.name, node);
        return reply(http::status::created, make_status(201, "", ""));
      }
      if (!target.name.empty()) throw method_not_allowed("POST is not allowed on a named object");
      if (type.namespaced() && target.ns.empty()) {
        throw ApiError(404, "NotFound", "the server could not find the requested resource");
      }
      return reply(http::status::created, *with_warnings(store.create(type, target.ns, object_body(), write)));
    }
    case http::verb::put: {
      if (target.name.empty()) throw method_not_allowed("PUT needs an object name");
      return reply(http::status::ok,
                   *with_warnings(store.update(type, target.ns, target.name, object_body(), sub, write)));
    }
    case http::verb::patch: {
      if (target.name.empty()) throw method_not_allowed("PATCH needs an object name");
      PatchType patch_type = patch_type_from_content_type(std::string(request_->base()[http::field::content_type]));
      return reply(http::status::ok, *with_warnings(store.patch(type, target.ns, target.name, patch_type,
                                                                parse_body(request_->body()), sub, write)));
    }
    case http::verb::delete_: {
      DeleteOptions options;
      json body = request_->body().empty() ? json::object() : parse_body(request_->body());
      std::string policy = param(params_, "propagationPolicy");
      if (policy.empty() && body.is_object()) policy = body.value("propagationPolicy", "");
      if (policy.empty() && body.is_object() && body.contains("orphanDependents") && body["orphanDependents"] == true) {
        policy = "Orphan";
      }
      options.propagation = propagation(policy);
      if (params_.count("gracePeriodSeconds")) {
        options.grace_period_seconds = int_param(params_, "gracePeriodSeconds", 0);
      } else if (body.is_object() && body.contains("gracePeriodSeconds") && body["gracePeriodSeconds"].is_number()) {
        options.grace_period_seconds = body["gracePeriodSeconds"].get<int64_t>();
      }
      if (body.is_object() && body.contains("preconditions") && body["preconditions"].is_object()) {
        options.precondition_uid = body["preconditions"].value("uid", "");
        options.precondition_resource_version = body["preconditions"].value("resourceVersion", "");
      }
      options.dry_run = param(params_, "dryRun") == "All" ? DryRun::kAll : DryRun::kNo;
      if (target.name.empty()) {
        std::vector<ObjectPtr> removed = store.remove_collection(type, target.ns, list_options(target), options);
        json items = json::array();
        for (const ObjectPtr& o : removed) items.push_back(*o);
        return reply(http::status::ok, json{{"apiVersion", type.api_version()},
                                            {"kind", type.list_kind},
                                            {"metadata", json::object()},
                                            {"items", items}});
      }
      DeleteResult result = store.remove(type, target.ns, target.name, options);
      return reply(http::status::ok, *result.object);
    }
    default:
      throw method_not_allowed("the server does not allow this method on the requested resource");
  }
}

// Objects are JSON only. kubectl's generators (`kubectl create namespace|configmap|secret NAME`) send protobuf,
// which the stand-in refuses as a server without protobuf support would; `kubectl create -f`/`apply` send JSON.
void RequestHandler::require_json_body() const {
  std::string type(request_->base()[http::field::content_type]);
  if (request_->body().empty() || type.empty()) return;
  std::string base = type.substr(0, type.find(';'));
  bool json_like = base == "application/json" || base.ends_with("+json") || base == "application/apply-patch+yaml";
  bool creates_or_replaces = request_->method() == http::verb::post || request_->method() == http::verb::put;
  if (base == "application/vnd.kubernetes.protobuf" && creates_or_replaces) return;  // see object_body()
  if (!json_like) {
    throw ApiError(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types include: "
                   "application/json (the Kubernetes API stand-in does not read " +
                       base + "; use kubectl create -f or kubectl apply)");
  }
}

// The object of a create or update: JSON, or the protobuf kubectl's generators send.
json RequestHandler::object_body() const {
  std::string type(request_->base()[http::field::content_type]);
  if (type.rfind("application/vnd.kubernetes.protobuf", 0) == 0) return decode_protobuf_object(request_->body());
  return parse_body(request_->body());
}

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

// ---------------------------------------------------------------------------------------------------------------
// ApiServer

ApiServer::ApiServer(ServerOptions options) : options_(std::move(options)), store_(options_.store) {
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
    if (SSL_get_verify_result(ssl) == X509_V_OK &&
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof(cn)) > 0) {
      connection.certificate_user = cn;
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
