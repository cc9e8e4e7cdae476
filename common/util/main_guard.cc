#include "common/util/main_guard.h"

#include <cstdio>
#include <exception>
#include <regex>
#include <string>

#include "common/launch/exit_codes.h"
#include "common/util/error.h"

namespace torus {

void write_termination_log(const char* reason) noexcept {
  std::FILE* f = std::fopen("/dev/termination-log", "r+");
  if (f == nullptr) return;
  std::fputs(reason, f);
  std::fclose(f);
}

void append_termination_log(const char* line) noexcept {
  // "r+", not "a": outside a container there is no such file, and none must be made in the host's /dev.
  std::FILE* f = std::fopen("/dev/termination-log", "r+");
  if (f == nullptr) return;
  std::fseek(f, 0, SEEK_END);
  std::fputc('\n', f);
  std::fputs(line, f);
  std::fclose(f);
}

std::optional<ErrorReason> parse_error_line(std::string_view line) {
  static const std::regex kFinal(R"(^[A-Za-z0-9_.-]+: error: (.+)$)");
  static const std::regex kLogged(R"(^\S+Z E (?:\[[^\]]*\] )?\S+:\d+\] (.+)$)");
  const std::string text(line);
  std::smatch m;
  if (std::regex_match(text, m, kFinal)) return ErrorReason{ErrorLine::kFinal, m[1]};
  if (std::regex_match(text, m, kLogged)) return ErrorReason{ErrorLine::kLogged, m[1]};
  return std::nullopt;
}

int run_main(const char* program, const std::function<int()>& body) {
  std::string reason;
  int code = to_int(launch::ExitCode::kFailure);
  try {
    return body();
  } catch (const Timeout& e) {
    reason = e.what();
    code = to_int(launch::ExitCode::kCollectiveTimeout);
  } catch (const CheckpointLost& e) {
    reason = e.what();
    code = to_int(launch::ExitCode::kCheckpointLost);
  } catch (const HardwareFault& e) {
    reason = e.what();
    code = to_int(launch::ExitCode::kRetryable);
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown exception";
  }
  std::fprintf(stderr, "%s: error: %s\n", program, reason.c_str());
  write_termination_log(reason.c_str());
  return code;
}

}  // namespace torus
