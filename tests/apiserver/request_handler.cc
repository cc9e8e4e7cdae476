#include "tests/apiserver/request_handler.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>

#include "tests/apiserver/discovery.h"
#include "tests/apiserver/eviction.h"
#include "tests/apiserver/protobuf.h"
#include "tests/apiserver/yaml_json.h"

namespace torus::standin {

namespace {

bool has_group(const UserInfo& user, const std::string& group) {
  return std::find(user.groups.begin(), user.groups.end(), group) != user.groups.end();
}

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

}  // namespace

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
    std::optional<Target> resolved = resolve(segments);
    authorize(resolved, segments);
    if (auto special = route_special(segments)) return send(std::move(*special));
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
  user_.reset();
  if (server_.options_.authentication == ServerOptions::Authentication::kNone) return std::nullopt;
  if (!s.empty() && s[0] == "_standin") return std::nullopt;  // the tests' control API, not Kubernetes'
  const std::string authorization(request_->base()[http::field::authorization]);
  const std::string kBearer = "Bearer ";
  if (!authorization.empty()) {
    if (authorization.rfind(kBearer, 0) == 0) user_ = server_.token_user(authorization.substr(kBearer.size()));
    if (user_) return std::nullopt;
  } else if (!connection_.certificate_user.empty()) {
    user_ = UserInfo{connection_.certificate_user, connection_.certificate_groups};
    user_->groups.push_back("system:authenticated");
    return std::nullopt;
  } else if (s.size() == 1 && (s[0] == "healthz" || s[0] == "livez" || s[0] == "readyz" || s[0] == "version")) {
    return std::nullopt;
  }
  return reply(http::status::unauthorized, make_status(401, "Unauthorized", "Unauthorized"));
}

// The authorizer, after authentication: an authenticated user's resource request is checked against the stored RBAC
// objects (the verb, group, resource and subresource, namespace and name of the request), any other path against
// the non-resource rules; 403 Forbidden with the apiserver's message when nothing allows it.
void RequestHandler::authorize(const std::optional<Target>& target, const std::vector<std::string>& s) {
  if (!user_ || (!s.empty() && s[0] == "_standin")) return;
  RequestAttributes attributes;
  attributes.user = *user_;
  if (target) {
    const RequestInfo info = describe(*target);
    attributes.verb = info.verb;
    attributes.api_group = target->type->group;
    attributes.resource = target->type->plural;
    attributes.subresource = target->subresource;
    attributes.ns = target->ns;
    attributes.name = target->name;
  } else {
    attributes.verb = std::string(request_->method_string());
    for (char& c : attributes.verb) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    attributes.path = path_.empty() ? "/" : path_;
  }
  if (has_group(attributes.user, "system:masters")) return;  // before reading the store
  const Decision decision = torus::standin::authorize(attributes, server_.rbac_objects());
  if (decision.verdict == Verdict::kAllow) return;
  StatusDetails details;
  details.name = attributes.name;
  details.group = attributes.api_group;
  details.kind = attributes.resource;
  throw ApiError(403, "Forbidden", forbidden_message(attributes, decision.reason), details);
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
  if (!target.subresource.empty() && target.subresource != "status" && target.subresource != "binding" &&
      target.subresource != "token" && target.subresource != "eviction") {
    return std::nullopt;
  }
  if (target.subresource == "token" && target.type->group_resource() != "serviceaccounts") return std::nullopt;
  if (target.subresource == "status" && target.type->status != StatusSubresource::kPresent) return std::nullopt;
  if (target.subresource == "binding" && target.type->group_resource() != "pods") return std::nullopt;
  if (target.subresource == "eviction" && target.type->group_resource() != "pods") return std::nullopt;
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
  write.field_manager = field_manager();
  auto with_warnings = [&](WriteResult result) {
    warnings_ = std::move(result.warnings);
    return Store::as_version(result.object, type);
  };
  if (target.subresource == "eviction") {
    // pods/eviction serves only create (eviction.h); its answer's code is the HTTP status (201, or 500).
    if (request_->method() != http::verb::post) {
      throw method_not_allowed("the server does not allow this method on the requested resource");
    }
    const json status = evict_pod(store, target.ns, target.name, object_body(), write.dry_run);
    return reply(static_cast<http::status>(status.value("code", 201)), status);
  }
  switch (request_->method()) {
    case http::verb::get: {
      if (!target.name.empty()) {
        ObjectPtr object = store.get(type, target.ns, target.name);
        if (wants_table()) return reply(http::status::ok, to_table(type, {object}, table_objects()));
        return reply(http::status::ok, *object);
      }
      if (truthy(param(params_, "watch"))) {
        streamed = true;  // serve_watch validates the watch's options before its 200 header goes out
        return Response{};
      }
      validate_list_options(params_, false);
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
      if (target.subresource == "token") return reply(http::status::created, token_request(target));
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
      if (patch_type == PatchType::kApply) {
        const Force force = truthy(param(params_, "force")) ? Force::kYes : Force::kNo;
        WriteResult result = store.apply(type, target.ns, target.name, apply_body(), sub, write, force);
        // 201 when the apply made the object, as the apiserver answers.
        const http::status status = result.kind == WriteKind::kCreated ? http::status::created : http::status::ok;
        return reply(status, *with_warnings(std::move(result)));
      }
      if (params_.count("force")) {
        throw invalid("PatchOptions.meta.k8s.io", "meta.k8s.io", "",
                      {{"FieldValueForbidden", "Forbidden: may not be specified for non-apply patch", "force"}});
      }
      return reply(http::status::ok, *with_warnings(store.patch(type, target.ns, target.name, patch_type,
                                                                parse_body(request_->body()), sub, write)));
    }
    case http::verb::delete_: {
      DeleteOptions options;
      json body = request_->body().empty() ? json::object() : object_body();
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

// TokenRequest (authentication.k8s.io/v1), what `kubectl create token NAME` asks for: a bearer token of the
// service account. The request's audiences and expiry (JSON or kubectl's protobuf) are not read: the token lasts
// while the account exists.
json RequestHandler::token_request(const Target& target) {
  const std::string token = server_.mint_service_account_token(target.ns, target.name);
  const auto expiry = std::chrono::system_clock::now() + std::chrono::hours(1);
  const std::time_t t = std::chrono::system_clock::to_time_t(expiry);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return json{{"kind", "TokenRequest"},
              {"apiVersion", "authentication.k8s.io/v1"},
              {"metadata", {{"name", target.name}, {"namespace", target.ns}, {"creationTimestamp", nullptr}}},
              {"spec", {{"audiences", json::array({"https://kubernetes.default.svc"})}, {"expirationSeconds", 3600}}},
              {"status", {{"token", token}, {"expirationTimestamp", when}}}};
}

// Objects are JSON only. kubectl's generators (`kubectl create namespace|configmap|secret NAME`) send protobuf,
// which the stand-in refuses as a server without protobuf support would; `kubectl create -f`/`apply` send JSON.
void RequestHandler::require_json_body() const {
  std::string type(request_->base()[http::field::content_type]);
  if (request_->body().empty() || type.empty()) return;
  std::string base = type.substr(0, type.find(';'));
  bool json_like = base == "application/json" || base.ends_with("+json") || base == "application/apply-patch+yaml";
  bool protobuf_read = request_->method() == http::verb::post || request_->method() == http::verb::put ||
                       request_->method() == http::verb::delete_;
  if (base == "application/vnd.kubernetes.protobuf" && protobuf_read) return;  // see object_body()
  if (!json_like) {
    throw ApiError(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types include: "
                   "application/json (the Kubernetes API stand-in does not read " +
                       base + "; use kubectl create -f or kubectl apply)");
  }
}

// Who owns what this write sets: the fieldManager parameter, else the User-Agent's product ("kubectl-create",
// "helm"), as the apiserver names a manager when none is given.
std::string RequestHandler::field_manager() const {
  const std::string given = param(params_, "fieldManager");
  if (!given.empty()) return given;
  const std::string agent(request_->base()[http::field::user_agent]);
  return agent.substr(0, agent.find('/'));
}

// An apply patch: a YAML (or JSON, which is YAML too) configuration of one object.
json RequestHandler::apply_body() const {
  if (request_->body().empty()) throw bad_request("the request body is empty");
  try {
    return json::parse(request_->body());
  } catch (const json::parse_error&) {
    std::vector<json> documents;
    try {
      documents = yaml_documents(request_->body(), "the apply patch");
    } catch (const std::exception& e) {
      throw bad_request(std::string("error decoding YAML: ") + e.what());
    }
    if (documents.size() != 1) throw bad_request("an apply patch must hold exactly one object");
    return documents.front();
  }
}

// The object of a create or update (or a delete's DeleteOptions): JSON, or the protobuf kubectl's generators and
// client-go's deletes send.
json RequestHandler::object_body() const {
  std::string type(request_->base()[http::field::content_type]);
  if (type.rfind("application/vnd.kubernetes.protobuf", 0) == 0) return decode_protobuf_object(request_->body());
  return parse_body(request_->body());
}

}  // namespace torus::standin
