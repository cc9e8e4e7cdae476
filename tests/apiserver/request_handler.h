#pragma once
// Serves one HTTP request of the stand-in: authentication, discovery and OpenAPI, the control API, the resource
// API over the store (request_handler.cc) and watches streamed as chunked JSON (request_watch.cc).
// Internal to tests/apiserver.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"
#include "tests/apiserver/connection.h"
#include "tests/apiserver/faults.h"
#include "tests/apiserver/query.h"
#include "tests/apiserver/rbac.h"
#include "tests/apiserver/table.h"

namespace torus::standin {

// Where a request points inside the resource API.
struct Target {
  ResourcePtr type;
  std::string ns;
  std::string name;
  std::string subresource;
};

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
  json apply_body() const;
  std::string field_manager() const;
  bool write_chunk(const std::string& data);
  void write_last_chunk(beast::error_code& ec);
  std::optional<Response> authenticate(const std::vector<std::string>& segments);
  void authorize(const std::optional<Target>& target, const std::vector<std::string>& segments);
  json token_request(const Target& target);
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
  QueryParams params_;
  std::vector<std::string> warnings_;
  std::optional<UserInfo> user_;  // who made the request, once authenticated (none over plain HTTP)
};

}  // namespace torus::standin
