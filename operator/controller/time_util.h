#pragma once
// RFC 3339 times as Kubernetes writes them ("2026-11-22T06:00:00Z"), to and from system_clock.
#include <optional>
#include <string>

#include "operator/controller/gang_policy.h"

namespace torus::controller {

std::string format_time(TimePoint t);
// nullopt for an empty or malformed text. Fractional seconds and numeric offsets are accepted.
std::optional<TimePoint> parse_time(const std::string& text);

}  // namespace torus::controller
