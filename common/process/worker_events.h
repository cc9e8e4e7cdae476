#pragma once
// Structured events a worker writes on stdout for whoever supervises it (`torus run`, the in-pod supervisor, the
// operator reading a termination message). One event per line: `@torus-event {"event":"progress","rank":0,...}`.
// Every other line is ordinary log output.
//
// One struct per event, written and read through one field list each (fields() below, the API codec's pattern:
// common/api/codec_fields.h), so the worker and its readers (the console's RunReport, the goodput ledger, the
// straggler watch, the gang policy) cannot disagree on a key: a reader takes the struct, never a key. Epochs are
// 1-based here as everywhere a person reads them: the epoch under way (progress), the epoch just evaluated.
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "common/process/goodput.h"

namespace torus::process {

inline constexpr std::string_view kEventPrefix = "@torus-event ";

template <class S, class T>
concept EventIs = std::same_as<std::remove_const_t<S>, T>;

// Where an attempt started: common/launch/checkpoint_layout.h's ResumeReason as a word (Fresh, ThisRun,
// ResumeFrom), the run whose checkpoint it was and the file.
struct ResumedFrom {
  std::string reason = "Fresh";
  std::string run;
  std::string path;
  bool operator==(const ResumedFrom&) const = default;
};

struct StartedEvent {
  static constexpr std::string_view kName = "started";
  int rank = 0;
  int world_size = 1;
  int attempt = 0;
  std::string run;  // TORUS_RUN_ID ("": none)
  int64_t resumed_step = 0;
  ResumedFrom resumed_from;
  std::optional<std::string> left_to_train;  // set when the run has nothing left: "all epochs done", ...
  std::optional<int> metrics_port;
  std::optional<double> target_accuracy;
  RankLedger ledger;
  bool operator==(const StartedEvent&) const = default;
};

struct ProgressEvent {
  static constexpr std::string_view kName = "progress";
  int rank = 0;
  int epoch = 0, epochs = 0;  // the epoch under way, 1-based, of the run's
  int64_t step = 0, steps_total = 0;
  double loss = 0, lr = 0;
  double images_per_s = 0;  // the gang's (common/metrics/rates.h)
  double busbw_gbps = 0;
  std::optional<double> eta_s;  // unknown until the step time is measured
  RankLedger ledger;
  bool operator==(const ProgressEvent&) const = default;
};

struct EvaluatedEvent {
  static constexpr std::string_view kName = "evaluated";
  int rank = 0;
  int epoch = 0;  // the epoch just evaluated, 1-based
  double accuracy = 0, top5 = 0, loss = 0;
  double elapsed_s = 0;  // the attempt's trainer clock
  // The epoch's own figures (rank 0's mean step loss, the gang's images/s over the epoch).
  std::optional<double> train_loss, images_per_s;
  std::optional<double> time_to_target_s;  // once the target was reached, on the trainer's clock
  bool operator==(const EvaluatedEvent&) const = default;
};

struct CheckpointEvent {
  static constexpr std::string_view kName = "checkpoint";
  int rank = 0;
  std::string path;
  int64_t step = 0;
  int epoch = 0;  // epochs done when it was written
  double seconds = 0;
  RankLedger ledger;
  bool operator==(const CheckpointEvent&) const = default;
};

struct FinishedEvent {
  static constexpr std::string_view kName = "finished";
  int rank = 0;
  int64_t steps = 0;  // the global step reached
  int epochs = 0;     // epochs completed by this attempt
  double elapsed_s = 0, images_per_s = 0, busbw_gbps = 0;
  bool reached_target = false;
  std::optional<double> accuracy;            // the last evaluation's top-1 (this run's or its checkpoint's)
  std::optional<std::string> left_to_train;  // set when the run trained nothing
  std::optional<std::string> allreduce_algorithm;
  std::optional<uint64_t> allreduce_calls, allreduce_bytes;
  std::optional<double> time_to_target_s;
  RankLedger ledger;
  bool operator==(const FinishedEvent&) const = default;
};

// A rank's last words when its gang failed (also under the reason in its termination message).
struct AbortedEvent {
  static constexpr std::string_view kName = "aborted";
  int rank = 0;
  int64_t step = 0;  // the last step it finished
  bool operator==(const AbortedEvent&) const = default;
};

using WorkerEvent =
    std::variant<StartedEvent, ProgressEvent, EvaluatedEvent, CheckpointEvent, FinishedEvent, AbortedEvent>;

// The field lists. `S` is the struct or the const struct: one list serves the writer (reads it) and the reader
// (fills it). A visitor is called v(key, member) for every field; optional members are left out when empty.

template <class V, class S>
requires EventIs<S, ResumedFrom>
void fields(V& v, S& x) {
  v("reason", x.reason);
  v("run", x.run);
  v("path", x.path);
}

template <class V, class S>
requires EventIs<S, RankLedger>
void fields(V& v, S& x) {
  for (TimePart p : kAllTimeParts) v(std::string(to_string(p)) + "_s", x.seconds[static_cast<size_t>(p)]);
  v("comm_init_s", x.comm_init_s);
  v("steps", x.steps);
  v("step_s", x.step_seconds);
  v("recent_step_s", x.recent_step_s);
}

template <class V, class S>
requires EventIs<S, StartedEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("world_size", x.world_size);
  v("attempt", x.attempt);
  v("run", x.run);
  v("resumed_step", x.resumed_step);
  v("resumed_from", x.resumed_from);
  v("left_to_train", x.left_to_train);
  v("metrics_port", x.metrics_port);
  v("target_accuracy", x.target_accuracy);
  v("ledger", x.ledger);
}

template <class V, class S>
requires EventIs<S, ProgressEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("epoch", x.epoch);
  v("epochs", x.epochs);
  v("step", x.step);
  v("steps_total", x.steps_total);
  v("loss", x.loss);
  v("lr", x.lr);
  v("images_per_s", x.images_per_s);
  v("busbw_gbps", x.busbw_gbps);
  v("eta_s", x.eta_s);
  v("ledger", x.ledger);
}

template <class V, class S>
requires EventIs<S, EvaluatedEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("epoch", x.epoch);
  v("accuracy", x.accuracy);
  v("top5", x.top5);
  v("loss", x.loss);
  v("elapsed_s", x.elapsed_s);
  v("train_loss", x.train_loss);
  v("images_per_s", x.images_per_s);
  v("time_to_target_s", x.time_to_target_s);
}

template <class V, class S>
requires EventIs<S, CheckpointEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("path", x.path);
  v("step", x.step);
  v("epoch", x.epoch);
  v("seconds", x.seconds);
  v("ledger", x.ledger);
}

template <class V, class S>
requires EventIs<S, FinishedEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("steps", x.steps);
  v("epochs", x.epochs);
  v("elapsed_s", x.elapsed_s);
  v("images_per_s", x.images_per_s);
  v("busbw_gbps", x.busbw_gbps);
  v("reached_target", x.reached_target);
  v("accuracy", x.accuracy);
  v("left_to_train", x.left_to_train);
  v("allreduce_algorithm", x.allreduce_algorithm);
  v("allreduce_calls", x.allreduce_calls);
  v("allreduce_bytes", x.allreduce_bytes);
  v("time_to_target_s", x.time_to_target_s);
  v("ledger", x.ledger);
}

template <class V, class S>
requires EventIs<S, AbortedEvent>
void fields(V& v, S& x) {
  v("rank", x.rank);
  v("step", x.step);
}

// The "event" name of `e` ("started", ...).
std::string_view event_name(const WorkerEvent& e);
// The rank that wrote it.
int event_rank(const WorkerEvent& e);

// `@torus-event <compact json>` (no newline).
std::string format_event(const WorkerEvent& event);
// The event on this line; nullopt for an ordinary log line. A line with the event prefix that does not read as one
// of the events above (an unknown name, a missing or mistyped field: a worker of another build) is nullopt too, and
// `error` (when given) says what was wrong, naming the event and the field.
std::optional<WorkerEvent> parse_event(std::string_view line, std::string* error = nullptr);
// Writes one event line to stdout and flushes, so the supervisor sees it at once. Thread-safe.
void emit_event(const WorkerEvent& event);

}  // namespace torus::process
