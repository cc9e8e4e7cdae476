#include "common/log/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "common/util/env.h"

namespace torus::log {
namespace {

Level parse_level(const std::string& s) {
  if (s == "debug") return Level::kDebug;
  if (s == "warn") return Level::kWarn;
  if (s == "error") return Level::kError;
  return Level::kInfo;
}

std::atomic<Level>& threshold_ref() {
  static std::atomic<Level> level{parse_level(env::get_or("TORUS_LOG_LEVEL", "info"))};
  return level;
}

std::mutex& tag_mutex() {
  static std::mutex m;
  return m;
}

std::string& tag_ref() {
  static std::string tag;
  return tag;
}

char level_letter(Level l) {
  switch (l) {
    case Level::kDebug:
      return 'D';
    case Level::kInfo:
      return 'I';
    case Level::kWarn:
      return 'W';
    case Level::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

Level threshold() { return threshold_ref().load(std::memory_order_relaxed); }
void set_threshold(Level level) { threshold_ref().store(level); }

void set_tag(std::string tag) {
  std::lock_guard<std::mutex> lock(tag_mutex());
  tag_ref() = std::move(tag);
}

// `file` relative to the source tree. -fmacro-prefix-map strips the tree's absolute prefix; a compiler that saw a
// path relative to the build folder (ccache with base_dir rewrites them so) left "../" steps in front of it.
const char* source_relative(const char* file) {
  while (std::strncmp(file, "../", 3) == 0) file += 3;
  return file;
}

void write(Level level, const char* file, int line, const std::string& message) {
  file = source_relative(file);
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(tag_mutex());
  const std::string& tag = tag_ref();
  std::fprintf(stderr, "%s.%03dZ %c %s%s%s%s:%d] %s\n", stamp, millis, level_letter(level), tag.empty() ? "" : "[",
               tag.c_str(), tag.empty() ? "" : "] ", file, line, message.c_str());
}

}  // namespace torus::log
