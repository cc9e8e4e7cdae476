#pragma once
// Structured events a worker writes on stdout for whoever supervises it (`torus run`, the in-pod supervisor).
// One event per line: `@torus-event {"event":"progress","rank":0,...}`. Every other line is ordinary log
// output. The supervisor parses events out of the stream and shows the rest, prefixed by rank.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace torus::process {

inline constexpr std::string_view kEventPrefix = "@torus-event ";

// Event names (the "event" field).
namespace event {
inline constexpr const char* kStarted = "started";        // rank, world_size, attempt, metrics_port, resumed_step
inline constexpr const char* kProgress = "progress";      // epoch, step, steps_total, loss, lr, images_per_s, ...
inline constexpr const char* kEvaluated = "evaluated";    // epoch, accuracy, top5, loss, elapsed_s, train_loss, images_per_s
inline constexpr const char* kCheckpoint = "checkpoint";  // path, step, seconds
inline constexpr const char* kFinished = "finished";      // accuracy, images_per_s, elapsed_s, time_to_target_s, ...
inline constexpr const char* kAborted = "aborted";        // step: the last step finished before its gang failed
}  // namespace event

// `@torus-event <compact json>` (no newline).
std::string format_event(const nlohmann::json& event);
// The event on this line, or nullopt for an ordinary log line (or a malformed event, which stays a log line).
std::optional<nlohmann::json> parse_event(std::string_view line);
// Writes one event line to stdout and flushes, so the supervisor sees it at once. Thread-safe.
void emit_event(const nlohmann::json& event);

}  // namespace torus::process
