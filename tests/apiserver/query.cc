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

}  // namespace torus::standin
