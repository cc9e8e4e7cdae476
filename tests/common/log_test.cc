#include "common/log/log.h"

#include <gtest/gtest.h>

namespace torus {
namespace {

TEST(Log, WritesOneLineWithTagFileAndMessage) {
  log::set_tag("rank 3");
  testing::internal::CaptureStderr();
  TLOG(Info) << "epoch " << 4;
  const std::string out = testing::internal::GetCapturedStderr();
  log::set_tag("");
  EXPECT_NE(out.find(" I [rank 3] tests/common/log_test.cc:"), std::string::npos) << out;
  EXPECT_NE(out.find("] epoch 4\n"), std::string::npos) << out;
}

TEST(Log, BelowThresholdIsNotEvaluated) {
  log::set_threshold(log::Level::kWarn);
  int evaluated = 0;
  auto touch = [&] { return ++evaluated; };
  testing::internal::CaptureStderr();
  TLOG(Info) << touch();
  const std::string out = testing::internal::GetCapturedStderr();
  log::set_threshold(log::Level::kInfo);
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace torus
