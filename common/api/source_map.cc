#include "common/api/source_map.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace torus::api {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "" (the document).
std::string parent_of(const std::string& path) {
  const auto cut = path.find_last_of(".[");
  return cut == std::string::npos ? std::string() : path.substr(0, cut);
}

}  // namespace

std::string canonical_path(const std::string& path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const auto close = path[i] == '[' ? path.find(']', i) : std::string::npos;
    if (close == std::string::npos) {
      out += path[i];
      continue;
    }
    const std::string_view inside(path.data() + i + 1, close - i - 1);
    if (all_digits(inside)) {
      out.append(path, i, close - i + 1);
    } else {
      out += '.';
      out += inside;
    }
    i = close;
  }
  return out;
}

void SourceMap::add(const std::string& path, SourcePosition position) {
  if (position.line < 1 || position.column < 1) return;  // yaml-cpp's null mark: no position known
  entries_[canonical_path(path)] = Entry{position, ""};
}

void SourceMap::override_with(const std::string& path, const std::string& origin) {
  const std::string key = canonical_path(path);
  for (const std::string& prefix : {key + ".", key + "["}) {
    auto it = entries_.lower_bound(prefix);
    while (it != entries_.end() && starts_with(it->first, prefix)) it = entries_.erase(it);
  }
  entries_[key] = Entry{{}, origin};
}

const SourceMap::Entry* SourceMap::override_under(const std::string& path) const {
  for (const std::string& prefix :
       path.empty() ? std::vector<std::string>{""} : std::vector<std::string>{path + ".", path + "["}) {
    for (auto it = entries_.lower_bound(prefix); it != entries_.end() && starts_with(it->first, prefix); ++it) {
      if (!it->second.origin.empty() && it->first != path) return &it->second;
    }
  }
  return nullptr;
}

void SourceMap::locate(FieldError& error) const {
  if (error.line > 0 || !error.origin.empty() || entries_.empty()) return;
  std::string path = canonical_path(error.path);
  for (;;) {
    const Entry* found = nullptr;
    if (auto it = entries_.find(path); it != entries_.end()) {
      found = &it->second;
    } else {
      found = override_under(path);
    }
    if (found) {
      error.line = found->position.line;
      error.column = found->position.column;
      error.origin = found->origin;
      return;
    }
    if (path.empty()) return;
    path = parent_of(path);
  }
}

void SourceMap::locate(FieldErrors& errors) const {
  for (auto& e : errors) locate(e);
}

}  // namespace torus::api
