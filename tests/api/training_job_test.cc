// The TrainingJob types (common/api/training_job.h): every enum spelling round-trips; conditions keep their
// transition time unless their status changes.
#include "common/api/training_job.h"

#include <gtest/gtest.h>

#include <string>

namespace torus::api {
namespace {

TEST(Enums, RoundTripEverySpelling) {
  for (const auto& [value, name] : EnumNames<AllReduceAlgorithm>::kValues) {
    EXPECT_EQ(to_string(value), name);
    EXPECT_EQ(parse_enum<AllReduceAlgorithm>(name), value);
  }
  EXPECT_EQ(to_string(Phase::kRestarting), "Restarting");
  EXPECT_EQ(parse_enum<Dataset>("fashion-mnist"), Dataset::kFashionMnist);
  EXPECT_FALSE(parse_enum<RestartPolicy>("onfailure").has_value());  // case-sensitive, as in Kubernetes
  EXPECT_EQ(enum_choices<Precision>(), "\"fp32\", \"bf16\", \"fp16\"");
}

TEST(Conditions, TransitionTimeChangesOnlyWithStatus) {
  TrainingJobStatus s;
  EXPECT_TRUE(set_condition(s, {"Running", ConditionStatus::kFalse, "Pending", "waiting", "2026-01-01T00:00:00Z", 1}));
  // Same status, new reason: updated, but the transition time stays.
  EXPECT_TRUE(set_condition(s, {"Running", ConditionStatus::kFalse, "Scheduling", "2 of 4", "", 1}));
  ASSERT_NE(find_condition(s, "Running"), nullptr);
  EXPECT_EQ(find_condition(s, "Running")->reason, "Scheduling");
  EXPECT_EQ(find_condition(s, "Running")->last_transition_time, "2026-01-01T00:00:00Z");
  // Nothing new: no change reported.
  EXPECT_FALSE(set_condition(s, {"Running", ConditionStatus::kFalse, "Scheduling", "2 of 4", "", 1}));
  // New status: a fresh transition time (now, RFC 3339 UTC).
  EXPECT_TRUE(set_condition(s, {"Running", ConditionStatus::kTrue, "AllRanksRunning", "", "", 1}));
  const std::string t = find_condition(s, "Running")->last_transition_time;
  EXPECT_NE(t, "2026-01-01T00:00:00Z");
  EXPECT_EQ(t.size(), 20u);
  EXPECT_EQ(t.back(), 'Z');
  EXPECT_TRUE(set_condition(s, {"Failed", ConditionStatus::kFalse, "", "", "", std::nullopt}));
  EXPECT_EQ(s.conditions.size(), 2u);
  EXPECT_EQ(find_condition(s, "Suspended"), nullptr);
}

}  // namespace
}  // namespace torus::api
