// The one place that catches: run_main turns an escaped exception into an exit code and one stderr line, and
// parse_error_line reads that line (and TLOG error lines) back, as launchers do to quote a failed rank.
#include "common/util/main_guard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/launch/exit_codes.h"
#include "common/util/error.h"

namespace torus {
namespace {

// Runs `body` through run_main; returns its exit code and what it wrote to stderr.
std::pair<int, std::string> run_captured(const std::function<int()>& body) {
  ::testing::internal::CaptureStderr();
  const int code = run_main("torus-test", body);
  return {code, ::testing::internal::GetCapturedStderr()};
}

TEST(RunMain, ReturnsTheBodysCodeAndSaysNothing) {
  const auto [code, err] = run_captured([] { return 7; });
  EXPECT_EQ(code, 7);
  EXPECT_EQ(err, "");
}

TEST(RunMain, ATimeoutIsACollectiveTimeoutAnythingElseAFailure) {
  const auto [timeout, timeout_err] = run_captured([]() -> int { throw Timeout("rank 3 never arrived"); });
  EXPECT_EQ(timeout, launch::to_int(launch::ExitCode::kCollectiveTimeout));
  EXPECT_EQ(timeout_err, "torus-test: error: rank 3 never arrived\n");
  const auto [bad, bad_err] = run_captured([]() -> int { throw InvalidArgument("spec.gang.workers: must be >= 1"); });
  EXPECT_EQ(bad, launch::to_int(launch::ExitCode::kFailure));
  EXPECT_EQ(bad_err, "torus-test: error: spec.gang.workers: must be >= 1\n");
  const auto [odd, odd_err] = run_captured([]() -> int { throw 42; });
  EXPECT_EQ(odd, launch::to_int(launch::ExitCode::kFailure));
  EXPECT_EQ(odd_err, "torus-test: error: unknown exception\n");
}

// The machine's fault (a GPU's uncorrectable ECC error): the same job can run on healthy hardware, so retryable.
TEST(RunMain, AHardwareFaultIsRetryable) {
  const auto [code, err] = run_captured([]() -> int { throw HardwareFault("CUDA error: uncorrectable ECC error"); });
  EXPECT_EQ(code, launch::to_int(launch::ExitCode::kRetryable));
  EXPECT_EQ(err, "torus-test: error: CUDA error: uncorrectable ECC error\n");
}

TEST(RunMain, ItsLastLineReadsBackAsTheReason) {
  const auto [code, err] = run_captured([]() -> int { throw std::runtime_error("/data/x.bin: truncated"); });
  ASSERT_EQ(code, 1);
  const auto reason = parse_error_line(err.substr(0, err.size() - 1));
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->kind, ErrorLine::kFinal);
  EXPECT_EQ(reason->text, "/data/x.bin: truncated");
}

TEST(ErrorLine, ReadsTheFinalReasonAndLoggedErrors) {
  auto final_line = parse_error_line("torus-worker: error: /data/x.bin: truncated: 100 bytes");
  ASSERT_TRUE(final_line);
  EXPECT_EQ(final_line->kind, ErrorLine::kFinal);
  EXPECT_EQ(final_line->text, "/data/x.bin: truncated: 100 bytes");
  auto logged = parse_error_line("2026-11-23T09:17:56.594Z E [rank 1] ../worker/comm/watchdog.cc:117] watchdog: late");
  ASSERT_TRUE(logged);
  EXPECT_EQ(logged->kind, ErrorLine::kLogged);
  EXPECT_EQ(logged->text, "watchdog: late");
  EXPECT_FALSE(parse_error_line("2026-11-23T09:17:56.594Z I [rank 1] ../worker/x.cc:1] fine"));
  EXPECT_FALSE(parse_error_line("epoch 1: validation accuracy 21.87%"));
}

// Outside a container there is no termination log, and writing last words must not make one in the host's /dev
// (every `torus run` would then write into one file shared by all).
TEST(TerminationLog, IsWrittenOnlyWhereTheRuntimeMadeIt) {
  if (std::filesystem::exists("/dev/termination-log")) GTEST_SKIP() << "in a container: its runtime made the file";
  write_termination_log("reason");
  append_termination_log("@torus-event {}");
  EXPECT_FALSE(std::filesystem::exists("/dev/termination-log"));
}

}  // namespace
}  // namespace torus
