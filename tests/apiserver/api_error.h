#pragma once
// Errors the stand-in answers as Kubernetes `Status` objects (kind Status, apiVersion v1), with the codes, reasons
// and messages the real apiserver uses, so clients' error handling is exercised for real.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/util/error.h"

namespace torus::standin {

using json = nlohmann::json;

// One entry of Status.details.causes: which field is wrong and why.
struct Cause {
  std::string type;  // "FieldValueInvalid", "FieldValueRequired", "FieldValueNotSupported", ...
  std::string message;
  std::string field;
};

// What a Status names: the object's name, the API group and the resource (called "kind" in Status.details).
struct StatusDetails {
  std::string name;
  std::string group;
  std::string kind;
  std::vector<Cause> causes;
  int retry_after_seconds = 0;
};

// A request the apiserver refuses: the server turns it into an HTTP response with the Status as body.
class ApiError : public torus::Error {
 public:
  ApiError(int code, std::string reason, const std::string& message, StatusDetails details = {});

  int code() const { return code_; }
  const std::string& reason() const { return reason_; }
  const StatusDetails& details() const { return details_; }
  json status() const;

 private:
  int code_;
  std::string reason_;
  StatusDetails details_;
};

// The Status body itself, also used for successes ("status":"Success") and for watch ERROR events.
json make_status(int code, const std::string& reason, const std::string& message, const StatusDetails& details = {});

// The usual refusals, worded as kube-apiserver words them. `resource` is the group-qualified resource,
// e.g. "pods" or "trainingjobs.torus.dev".
ApiError not_found(const std::string& resource, const std::string& group, const std::string& name);
ApiError already_exists(const std::string& resource, const std::string& group, const std::string& name);
ApiError conflict(const std::string& resource, const std::string& group, const std::string& name);
ApiError bad_request(const std::string& message);
ApiError invalid(const std::string& kind_with_group, const std::string& group, const std::string& name,
                 std::vector<Cause> causes);
ApiError gone(const std::string& message);
ApiError method_not_allowed(const std::string& message);
ApiError unsupported_media_type(const std::string& content_type);

}  // namespace torus::standin
