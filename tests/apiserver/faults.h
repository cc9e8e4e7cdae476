#pragma once
// Fault injection and request accounting for the stand-in. Tests (C++ API) or scripts (POST /_standin/faults)
// arm rules; the server asks on_request() before serving each API request.
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/api_error.h"

namespace torus::standin {

// What a request is, in the apiserver's authorization vocabulary.
struct RequestInfo {
  std::string verb;         // get, list, watch, create, update, patch, delete, deletecollection
  std::string resource;     // group-qualified: "pods", "trainingjobs.torus.dev"
  std::string subresource;  // "", "status", "binding"
  std::string ns;
  std::string name;
};

// A rule matches a verb and a resource; "*" matches any. "pods/status" matches that subresource only, "pods"
// matches the main resource and its subresources.
struct FaultMatch {
  std::string verb = "*";
  std::string resource = "*";
};

// What the server must do with one request: wait first, then answer with an error or serve it.
struct FaultDecision {
  std::chrono::milliseconds delay{0};
  std::optional<ApiError> error;
};

class Faults {
 public:
  // The next `count` matching requests get `code` (500 InternalError or 429 TooManyRequests with Retry-After).
  void fail_next(int count, const FaultMatch& match, int code, int retry_after_seconds = 1);
  // The next `count` matching requests (count < 0: all until clear()) are answered `delay` late.
  void delay(std::chrono::milliseconds delay, int count, const FaultMatch& match);
  // The next `count` updates and patches of `resource` ("*": any) get 409 Conflict.
  void conflict_next(int count, const std::string& resource);
  void clear();

  FaultDecision on_request(const RequestInfo& request);

  // Requests served, by verb and by "resource verb": {"total":N,"byVerb":{...},"byResource":{"pods":{"create":8}}}.
  nlohmann::json counters() const;
  int64_t count(const std::string& verb, const std::string& resource = "*") const;
  void reset_counters();

  // Arms a rule from the control endpoint's JSON ({"action":"fail"|"delay"|"conflict"|"clear", ...}); throws
  // ApiError 400 naming the field when the request is malformed. dropWatches/compact are the server's.
  void arm(const nlohmann::json& request);

 private:
  enum class Kind { kError, kDelay, kConflict };
  struct Rule {
    Kind kind;
    FaultMatch match;
    int remaining;  // < 0: unlimited
    int code = 0;
    int retry_after_seconds = 0;
    std::chrono::milliseconds delay{0};
  };
  static bool matches(const FaultMatch& match, const RequestInfo& request);

  mutable std::mutex mutex_;
  std::vector<Rule> rules_;
  std::map<std::string, std::map<std::string, int64_t>> counts_;  // resource -> verb -> requests
  int64_t total_ = 0;
};

}  // namespace torus::standin
