#pragma once
// How k8s.io/pod-security-admission words its findings (policy/helpers.go, and Go's fmt): shared by the checks
// (pod_security_checks.cc) and the admission decisions (pod_security.cc). Internal to tests/apiserver.
#include <cstdio>
#include <string>

namespace torus::standin::pod_security_wording {

// joinQuote: each item in double quotes (not escaped), joined by ", ".
template <typename List>
std::string join_quote(const List& list) {
  std::string out;
  bool first = true;
  for (const std::string& item : list) {
    out += (first ? "\"" : ", \"") + item + "\"";
    first = false;
  }
  return out;
}

// strings.Join.
template <typename List>
std::string join(const List& list, const std::string& separator) {
  std::string out;
  bool first = true;
  for (const std::string& item : list) {
    out += (first ? "" : separator) + item;
    first = false;
  }
  return out;
}

inline std::string pluralize(const std::string& singular, const std::string& plural, size_t count) {
  return count == 1 ? singular : plural;
}

// "container \"a\"", "containers \"a\", \"b\"".
template <typename List>
std::string containers_phrase(const List& names) {
  return pluralize("container", "containers", names.size()) + " " + join_quote(names);
}

inline bool has_prefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Go's %q (annotation values in the checks' details, label values in field errors): the text in double quotes,
// with quotes, backslashes and control characters escaped; printable ASCII and UTF-8 pass as they are.
inline std::string go_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace torus::standin::pod_security_wording
