// The worker's events: each written and read through its one field list, so what a reader gets is what was written,
// and a line that does not read as an event says why.
#include "common/process/worker_events.h"

#include <gtest/gtest.h>

namespace torus::process {
namespace {

RankLedger sample_ledger() {
  RankLedger l;
  for (TimePart p : kAllTimeParts) l[p] = 0.5 + static_cast<double>(p);
  l.comm_init_s = 0.25;
  l.steps = 12;
  l.step_seconds = 1.5;
  l.recent_step_s = 0.125;
  return l;
}

// Every event, each field set to something other than its default, reads back equal.
TEST(WorkerEvents, EveryEventReadsBackAsWritten) {
  const std::vector<WorkerEvent> events = {
      StartedEvent{.rank = 1,
                   .world_size = 4,
                   .attempt = 2,
                   .run = "r",
                   .resumed_step = 40,
                   .resumed_from = {"ResumeFrom", "old", "/c/old/ckpt-40.torus"},
                   .left_to_train = "all epochs done",
                   .metrics_port = 9401,
                   .target_accuracy = 0.9,
                   .ledger = sample_ledger()},
      ProgressEvent{.rank = 1,
                    .epoch = 2,
                    .epochs = 4,
                    .step = 50,
                    .steps_total = 100,
                    .loss = 0.5,
                    .lr = 0.1,
                    .images_per_s = 900,
                    .busbw_gbps = 1.5,
                    .eta_s = 12.5,
                    .ledger = sample_ledger()},
      EvaluatedEvent{.rank = 0,
                     .epoch = 2,
                     .accuracy = 0.8,
                     .top5 = 0.99,
                     .loss = 0.4,
                     .elapsed_s = 30,
                     .train_loss = 0.6,
                     .images_per_s = 950,
                     .time_to_target_s = 29},
      CheckpointEvent{
          .rank = 0, .path = "/c/r/ckpt-50.torus", .step = 50, .epoch = 2, .seconds = 0.25, .ledger = sample_ledger()},
      FinishedEvent{.rank = 0,
                    .steps = 100,
                    .epochs = 4,
                    .elapsed_s = 60,
                    .images_per_s = 1000,
                    .busbw_gbps = 2,
                    .reached_target = true,
                    .accuracy = 0.91,
                    .left_to_train = "target reached",
                    .allreduce_algorithm = "ring",
                    .allreduce_calls = 8,
                    .allreduce_bytes = 800,
                    .time_to_target_s = 55,
                    .ledger = sample_ledger()},
      AbortedEvent{.rank = 3, .step = 77},
  };
  for (const WorkerEvent& e : events) {
    const std::string line = format_event(e);
    EXPECT_EQ(line.rfind("@torus-event {", 0), 0u) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    std::string error;
    const auto back = parse_event(line, &error);
    ASSERT_TRUE(back) << line << ": " << error;
    EXPECT_EQ(*back, e) << line;
    EXPECT_EQ(event_name(*back), event_name(e));
  }
  // Optional fields left out are absent from the line, and read back absent.
  const std::string bare = format_event(ProgressEvent{});
  EXPECT_EQ(bare.find("eta_s"), std::string::npos) << bare;
  EXPECT_EQ(std::get<ProgressEvent>(*parse_event(bare)).eta_s, std::nullopt);
}

TEST(WorkerEvents, OrdinaryLinesAreNotEventsAndBadEventLinesSayWhy) {
  std::string error;
  EXPECT_FALSE(parse_event("epoch 3 loss 0.2", &error).has_value());
  EXPECT_EQ(error, "") << "an ordinary log line is no error";
  auto why = [](std::string_view line) {
    std::string e;
    EXPECT_FALSE(parse_event(line, &e).has_value()) << line;
    return e;
  };
  EXPECT_EQ(why("@torus-event {not json"), "not a JSON object");
  EXPECT_EQ(why("@torus-event [1,2]"), "not a JSON object");
  EXPECT_EQ(why("@torus-event {\"rank\":1}"), "no \"event\" name");
  EXPECT_EQ(why("@torus-event {\"event\":\"bench\"}"), "unknown event \"bench\"");
  EXPECT_EQ(why("@torus-event {\"event\":\"aborted\",\"rank\":1}"), "aborted.step: missing");
  EXPECT_EQ(why("@torus-event {\"event\":\"aborted\",\"rank\":1,\"step\":\"7\"}"),
            "aborted.step: expected an integer, got \"7\"");
  // A renamed key in a nested field list is named with its path.
  std::string line = format_event(CheckpointEvent{.path = "p"});
  line.replace(line.find("\"comm_init_s\""), 13, "\"comm_init\"");
  EXPECT_EQ(why(line), "checkpoint.ledger.comm_init_s: missing");
}

}  // namespace
}  // namespace torus::process
