#pragma once
// RFC 3339 times as Kubernetes and Go write them ("2026-11-22T06:00:00Z", "2026-11-22T08:00:00.5+02:00"), to and
// from system_clock. Shared by the controller (conditions, deadlines) and the API client (exec credential expiry).
#include <chrono>
#include <optional>
#include <string>

namespace torus {

// Whole seconds, UTC, "Z".
std::string format_rfc3339(std::chrono::system_clock::time_point t);
// nullopt for an empty or malformed text. Fractional seconds (dropped) and numeric offsets are accepted.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(const std::string& text);

}  // namespace torus
