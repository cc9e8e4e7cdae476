#include "tests/apiserver/faults.h"

namespace torus::standin {

namespace {

std::string required_string(const nlohmann::json& request, const char* field, const std::string& fallback) {
  if (!request.contains(field)) return fallback;
  if (!request[field].is_string()) throw bad_request(std::string("faults: ") + field + ": must be a string");
  return request[field].get<std::string>();
}

int int_field(const nlohmann::json& request, const char* field, int fallback) {
  if (!request.contains(field)) return fallback;
  if (!request[field].is_number_integer()) throw bad_request(std::string("faults: ") + field + ": must be an integer");
  return request[field].get<int>();
}

ApiError injected(int code, int retry_after_seconds, const RequestInfo& request) {
  if (code == 429) {
    StatusDetails details;
    details.retry_after_seconds = retry_after_seconds;
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.", details);
  }
  if (code == 409) return conflict(request.resource, "", request.name);
  if (code == 503) return ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request");
  if (code == 403) {
    // As RBAC denies: `pods is forbidden: User "..." cannot list resource "pods" in API group "" in the namespace "x"`.
    auto dot = request.resource.find('.');
    std::string plural = request.resource.substr(0, dot);
    std::string group = dot == std::string::npos ? "" : request.resource.substr(dot + 1);
    std::string scope = request.ns.empty() ? "at the cluster scope" : "in the namespace \"" + request.ns + "\"";
    return ApiError(403, "Forbidden",
                    plural + " is forbidden: User \"system:serviceaccount:default:torus-operator\" cannot " +
                        request.verb + " resource \"" + plural + "\" in API group \"" + group + "\" " + scope);
  }
  return ApiError(code, "InternalError",
                  "Internal error occurred: injected fault (" + request.verb + " " + request.resource + ")");
}

}  // namespace

void Faults::fail_next(int count, const FaultMatch& match, int code, int retry_after_seconds) {
  std::lock_guard lock(mutex_);
  rules_.push_back(Rule{Kind::kError, match, count, code, retry_after_seconds, {}});
}

void Faults::delay(std::chrono::milliseconds delay, int count, const FaultMatch& match) {
  std::lock_guard lock(mutex_);
  rules_.push_back(Rule{Kind::kDelay, match, count, 0, 0, delay});
}

void Faults::conflict_next(int count, const std::string& resource) {
  std::lock_guard lock(mutex_);
  // Updates and patches both write: one rule per verb would split the count, so match the verb in on_request.
  rules_.push_back(Rule{Kind::kConflict, FaultMatch{"*", resource}, count, 409, 0, {}});
}

void Faults::clear() {
  std::lock_guard lock(mutex_);
  rules_.clear();
}

bool Faults::matches(const FaultMatch& match, const RequestInfo& request) {
  if (match.verb != "*" && match.verb != request.verb) return false;
  if (match.resource == "*") return true;
  if (match.resource == request.resource) return true;
  return !request.subresource.empty() && match.resource == request.resource + "/" + request.subresource;
}

FaultDecision Faults::on_request(const RequestInfo& request) {
  std::lock_guard lock(mutex_);
  ++total_;
  std::string resource = request.subresource.empty() ? request.resource : request.resource + "/" + request.subresource;
  ++counts_[resource][request.verb];
  FaultDecision decision;
  for (auto it = rules_.begin(); it != rules_.end();) {
    bool writes = request.verb == "update" || request.verb == "patch";
    bool hit = matches(it->match, request) && (it->kind != Kind::kConflict || writes);
    bool wanted = it->kind == Kind::kDelay ? decision.delay.count() == 0 : !decision.error.has_value();
    if (!hit || !wanted) {
      ++it;
      continue;
    }
    if (it->kind == Kind::kDelay) {
      decision.delay = it->delay;
    } else {
      decision.error = injected(it->code, it->retry_after_seconds, request);
    }
    if (it->remaining > 0 && --it->remaining == 0) {
      it = rules_.erase(it);
    } else {
      ++it;
    }
  }
  return decision;
}

nlohmann::json Faults::counters() const {
  std::lock_guard lock(mutex_);
  nlohmann::json by_verb = nlohmann::json::object();
  nlohmann::json by_resource = nlohmann::json::object();
  for (const auto& [resource, verbs] : counts_) {
    for (const auto& [verb, n] : verbs) {
      by_resource[resource][verb] = n;
      by_verb[verb] = by_verb.value(verb, int64_t{0}) + n;
    }
  }
  return {{"total", total_}, {"byVerb", by_verb}, {"byResource", by_resource}};
}

int64_t Faults::count(const std::string& verb, const std::string& resource) const {
  std::lock_guard lock(mutex_);
  int64_t n = 0;
  for (const auto& [r, verbs] : counts_) {
    if (resource != "*" && r != resource) continue;
    for (const auto& [v, c] : verbs) {
      if (verb == "*" || v == verb) n += c;
    }
  }
  return n;
}

void Faults::reset_counters() {
  std::lock_guard lock(mutex_);
  counts_.clear();
  total_ = 0;
}

void Faults::arm(const nlohmann::json& request) {
  if (!request.is_object()) throw bad_request("faults: the body must be a JSON object with an \"action\"");
  std::string action = required_string(request, "action", "");
  FaultMatch match{required_string(request, "verb", "*"), required_string(request, "resource", "*")};
  int count = int_field(request, "count", 1);
  if (action == "fail") {
    int code = int_field(request, "code", 500);
    if (code < 400 || code > 599)
      throw bad_request("faults: code: must be an HTTP error code, got " + std::to_string(code));
    fail_next(count, match, code, int_field(request, "retryAfterSeconds", 1));
  } else if (action == "delay") {
    delay(std::chrono::milliseconds(int_field(request, "milliseconds", 100)), int_field(request, "count", -1), match);
  } else if (action == "conflict") {
    conflict_next(count, match.resource);
  } else if (action == "clear") {
    clear();
  } else {
    throw bad_request("faults: action: expected one of fail, delay, conflict, clear, dropWatches, compact; got \"" +
                      action + "\"");
  }
}

}  // namespace torus::standin
