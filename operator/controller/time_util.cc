#include "operator/controller/time_util.h"

#include "common/util/rfc3339.h"

namespace torus::controller {

std::string format_time(TimePoint t) { return format_rfc3339(t); }

std::optional<TimePoint> parse_time(const std::string& text) { return parse_rfc3339(text); }

}  // namespace torus::controller
