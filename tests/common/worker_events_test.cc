#include "common/process/worker_events.h"

#include <gtest/gtest.h>

namespace torus::process {
namespace {

TEST(WorkerEvents, RoundTrip) {
  nlohmann::json e = {{"event", event::kProgress}, {"rank", 1}, {"loss", 0.25}};
  const std::string line = format_event(e);
  EXPECT_EQ(line.rfind("@torus-event {", 0), 0u);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto parsed = parse_event(line);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, e);
}

TEST(WorkerEvents, OrdinaryAndMalformedLinesAreNotEvents) {
  EXPECT_FALSE(parse_event("epoch 3 loss 0.2").has_value());
  EXPECT_FALSE(parse_event("@torus-event {not json").has_value());
  EXPECT_FALSE(parse_event("@torus-event [1,2]").has_value());
  EXPECT_FALSE(parse_event("@torus-event {\"rank\":1}").has_value());  // no "event" field
}

}  // namespace
}  // namespace torus::process
