#pragma once
// The one place that catches: runs a program body, reports the reason for failure on stderr and in
// /dev/termination-log (Kubernetes shows it in the pod status), and turns it into an exit code.
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace torus {

// Returns body()'s exit code, or for an escaped exception: ExitCode::kCollectiveTimeout for torus::Timeout (a
// peer that never arrived: worth a gang restart), ExitCode::kCheckpointLost for torus::CheckpointLost,
// ExitCode::kRetryable for torus::HardwareFault (the machine's fault: a GPU's uncorrectable ECC error),
// ExitCode::kFailure for anything else. (A peer that dies
// mid-collective is handled by the comm watchdog, which exits with ExitCode::kRetryable itself.)
int run_main(const char* program, const std::function<int()>& body);

// What a failing Torus program said, read back from one line of its stderr: the reason of run_main's last line
// ("torus-worker: error: REASON"), or the message of a TLOG error line ("...Z E [tag] file.cc:12] MESSAGE").
// Launchers quote it in their failure reason. nullopt for any other line.
enum class ErrorLine { kFinal, kLogged };
struct ErrorReason {
  ErrorLine kind = ErrorLine::kLogged;
  std::string text;
};
std::optional<ErrorReason> parse_error_line(std::string_view line);

// Writes `reason` to /dev/termination-log if that file exists (best effort, never throws).
void write_termination_log(const char* reason) noexcept;
// Adds `line` (after a newline) to what write_termination_log wrote: a machine-readable postscript under the
// reason's first line, which is what people and conditions quote.
void append_termination_log(const char* line) noexcept;

}  // namespace torus
