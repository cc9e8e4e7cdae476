#include "common/process/worker_events.h"

#include <cstdio>
#include <mutex>

namespace torus::process {

std::string format_event(const nlohmann::json& event) { return std::string(kEventPrefix) + event.dump(); }

std::optional<nlohmann::json> parse_event(std::string_view line) {
  if (line.substr(0, kEventPrefix.size()) != kEventPrefix) return std::nullopt;
  auto parsed = nlohmann::json::parse(line.substr(kEventPrefix.size()), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("event")) return std::nullopt;
  return parsed;
}

void emit_event(const nlohmann::json& event) {
  static std::mutex mu;
  const std::string line = format_event(event) + "\n";
  std::lock_guard<std::mutex> lock(mu);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace torus::process
