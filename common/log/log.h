#pragma once
// Small thread-safe logger: `TLOG(Info) << "epoch " << e;` writes one line to stderr:
//   2026-11-22T05:59:01.123Z I [rank 0] worker/train/trainer.cc:88] epoch 3
// Level from TORUS_LOG_LEVEL (debug|info|warn|error), read once; the component tag is set once per process.
#include <sstream>
#include <string>

namespace torus::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

Level threshold();
void set_threshold(Level level);
// A tag shown on every line, e.g. "rank 3" or "operator".
void set_tag(std::string tag);
// Writes one whole line atomically.
void write(Level level, const char* file, int line, const std::string& message);

class Line {
 public:
  Line(Level level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  ~Line() { write(level_, file_, line_, stream_.str()); }
  template <typename T>
  Line& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  Level level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace torus::log

#define TLOG(level)                                                \
  if (::torus::log::Level::k##level < ::torus::log::threshold()) { \
  } else                                                           \
    ::torus::log::Line(::torus::log::Level::k##level, __FILE__, __LINE__)
