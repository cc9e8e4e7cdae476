#include "tests/apiserver/query.h"

#include "tests/apiserver/api_error.h"

namespace torus::standin {
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

QueryParams parse_query(const std::string& query) {
  QueryParams params;
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

int64_t int_param(const QueryParams& params, const std::string& name, int64_t fallback) {
  auto it = params.find(name);
  if (it == params.end() || it->second.empty()) return fallback;
  if (it->second.find_first_not_of("-0123456789") != std::string::npos) {
    throw bad_request(name + ": must be an integer, got \"" + it->second + "\"");
  }
  return std::stoll(it->second);
}

std::string param(const QueryParams& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

bool truthy(const std::string& value) { return value == "1" || value == "true" || value == "True"; }

namespace {

Cause forbidden(const std::string& field, const std::string& detail) {
  return Cause{"FieldValueForbidden", "Forbidden: " + detail, field};
}

Cause not_supported(const std::string& value, const std::string& supported) {
  return Cause{"FieldValueNotSupported", "Unsupported value: \"" + value + "\": supported values: " + supported,
               "resourceVersionMatch"};
}

std::vector<Cause> list_causes(const QueryParams& params, bool send_initial_given) {
  std::vector<Cause> causes;
  const std::string match = param(params, "resourceVersionMatch");
  const std::string rv = param(params, "resourceVersion");
  if (!match.empty()) {
    if (rv.empty()) {
      causes.push_back(
          forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
    }
    if (!param(params, "continue").empty()) {
      causes.push_back(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
    }
    if (match != "Exact" && match != "NotOlderThan") {
      causes.push_back(not_supported(match, "\"Exact\", \"NotOlderThan\", \"\""));
    }
    if (match == "Exact" && rv == "0") {
      causes.push_back(forbidden("resourceVersionMatch",
                                 "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
    }
  }
  if (send_initial_given) causes.push_back(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
  return causes;
}

std::vector<Cause> watch_causes(const QueryParams& params, bool send_initial_given) {
  std::vector<Cause> causes;
  const std::string match = param(params, "resourceVersionMatch");
  if (send_initial_given && match != "NotOlderThan") {
    causes.push_back(
        forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
  }
  if (!match.empty()) {
    if (!send_initial_given) {
      causes.push_back(forbidden("resourceVersionMatch",
                                 "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
    }
    if (match != "NotOlderThan") causes.push_back(not_supported(match, "\"NotOlderThan\""));
  }
  return causes;
}

}  // namespace

InitialEvents validate_list_options(const QueryParams& params, bool watch) {
  const bool send_initial_given = params.count("sendInitialEvents") > 0;
  std::vector<Cause> causes = watch ? watch_causes(params, send_initial_given) : list_causes(params, send_initial_given);
  if (!causes.empty()) throw invalid("ListOptions.meta.k8s.io", "meta.k8s.io", "", std::move(causes));
  if (!send_initial_given) return InitialEvents::kByResourceVersion;
  return truthy(param(params, "sendInitialEvents")) ? InitialEvents::kSend : InitialEvents::kSkip;
}

}  // namespace torus::standin
