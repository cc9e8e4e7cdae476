#pragma once
// The one place that catches: runs a program body, reports the reason for failure on stderr and in
// /dev/termination-log (Kubernetes shows it in the pod status), and turns it into an exit code.
#include <functional>

namespace torus {

// Returns body()'s exit code, or for an escaped exception: ExitCode::kCollectiveTimeout for torus::Timeout (a
// peer that never arrived: worth a gang restart), ExitCode::kFailure for anything else. (A peer that dies
// mid-collective is handled by the comm watchdog, which exits with ExitCode::kRetryable itself.)
int run_main(const char* program, const std::function<int()>& body);

// Writes `reason` to /dev/termination-log if that file exists (best effort, never throws).
void write_termination_log(const char* reason) noexcept;

}  // namespace torus
