#pragma once
// `torus operator`: the TrainingJob controller, with leader election, /healthz, /readyz and /metrics.
#include <string>
#include <string_view>
#include <vector>

namespace torus::cli {

extern const std::string_view kOperatorSummary;
extern const std::string_view kOperatorUsage;

// Runs until SIGINT/SIGTERM (exit 0, lease released) or until leadership is lost (exit 1, so that Kubernetes
// restarts the replica as a standby).
int operator_command(const std::vector<std::string>& args);

}  // namespace torus::cli
