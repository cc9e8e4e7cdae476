#include "common/util/rfc3339.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace torus {

std::string format_rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::time_t secs = timegm(&tm);
  size_t pos = static_cast<size_t>(consumed);
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  }
  if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int hh = 0, mm = 0;
    if (std::sscanf(text.c_str() + pos + 1, "%2d:%2d", &hh, &mm) != 2) return std::nullopt;
    long offset = (hh * 60L + mm) * 60L;
    secs -= text[pos] == '+' ? offset : -offset;
  } else if (pos >= text.size() || (text[pos] != 'Z' && text[pos] != 'z')) {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(secs);
}

}  // namespace torus
