#include "tests/apiserver/api_error.h"

#include <utility>

namespace torus::standin {

ApiError::ApiError(int code, std::string reason, const std::string& message, StatusDetails details)
    : torus::Error(message), code_(code), reason_(std::move(reason)), details_(std::move(details)) {}

json ApiError::status() const { return make_status(code_, reason_, what(), details_); }

json make_status(int code, const std::string& reason, const std::string& message, const StatusDetails& details) {
  json status = {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}};
  status["status"] = code >= 200 && code < 300 ? "Success" : "Failure";
  if (!message.empty()) status["message"] = message;
  if (!reason.empty()) status["reason"] = reason;
  json d = json::object();
  if (!details.name.empty()) d["name"] = details.name;
  if (!details.group.empty()) d["group"] = details.group;
  if (!details.kind.empty()) d["kind"] = details.kind;
  if (details.retry_after_seconds > 0) d["retryAfterSeconds"] = details.retry_after_seconds;
  if (!details.causes.empty()) {
    json causes = json::array();
    for (const Cause& c : details.causes)
      causes.push_back({{"reason", c.type}, {"message", c.message}, {"field", c.field}});
    d["causes"] = causes;
  }
  if (!d.empty()) status["details"] = d;
  status["code"] = code;
  return status;
}

namespace {
StatusDetails named(const std::string& resource, const std::string& group, const std::string& name) {
  // Status.details.kind carries the plural resource name without the group, as the apiserver fills it.
  std::string plural = resource.substr(0, resource.find('.'));
  return StatusDetails{name, group, plural, {}, 0};
}
}  // namespace

ApiError not_found(const std::string& resource, const std::string& group, const std::string& name) {
  return ApiError(404, "NotFound", resource + " \"" + name + "\" not found", named(resource, group, name));
}

ApiError already_exists(const std::string& resource, const std::string& group, const std::string& name) {
  return ApiError(409, "AlreadyExists", resource + " \"" + name + "\" already exists", named(resource, group, name));
}

ApiError conflict(const std::string& resource, const std::string& group, const std::string& name) {
  return ApiError(409, "Conflict",
                  "Operation cannot be fulfilled on " + resource + " \"" + name +
                      "\": the object has been modified; please apply your changes to the latest version and try "
                      "again",
                  named(resource, group, name));
}

ApiError bad_request(const std::string& message) { return ApiError(400, "BadRequest", message); }

ApiError invalid(const std::string& kind_with_group, const std::string& group, const std::string& name,
                 std::vector<Cause> causes) {
  std::string message = kind_with_group + " \"" + name + "\" is invalid: ";
  if (causes.size() == 1) {
    message += causes[0].field + ": " + causes[0].message;
  } else {
    message += "[";
    for (size_t i = 0; i < causes.size(); ++i) {
      if (i > 0) message += ", ";
      message += causes[i].field + ": " + causes[i].message;
    }
    message += "]";
  }
  std::string kind = kind_with_group.substr(0, kind_with_group.find('.'));
  return ApiError(422, "Invalid", message, StatusDetails{name, group, kind, std::move(causes), 0});
}

ApiError gone(const std::string& message) { return ApiError(410, "Expired", message); }

ApiError method_not_allowed(const std::string& message) { return ApiError(405, "MethodNotAllowed", message); }

ApiError unsupported_media_type(const std::string& content_type) {
  return ApiError(415, "UnsupportedMediaType",
                  "the body of the request was in an unknown format - accepted media "
                  "types include: application/json-patch+json, application/merge-patch+json, "
                  "application/apply-patch+yaml; got " +
                      content_type);
}

}  // namespace torus::standin
