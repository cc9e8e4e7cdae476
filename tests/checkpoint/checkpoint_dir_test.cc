#include "worker/checkpoint/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/util/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace torus::worker::checkpoint {
namespace {

using testing::TempDir;

CheckpointWriter writer_for(int64_t step) {
  CheckpointWriter w;
  const int64_t payload[2] = {step, step * 3};
  w.add_section("params", payload, sizeof(payload));
  w.set_metadata({{"step", step}});
  return w;
}

void corrupt(const std::string& path) {
  auto bytes = testing::read_all(path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0xFF);
  testing::write_all(path, bytes);
}

TEST(CheckpointDir, NamesAndStepsSortNumerically) {
  TempDir tmp;
  CheckpointDir dir(tmp.str(), 10);
  for (int64_t step : {900, 1000, 50}) dir.save(step, writer_for(step));
  EXPECT_EQ(dir.path_for(1000), tmp.file("ckpt-1000.torus"));
  EXPECT_EQ(dir.steps(), (std::vector<int64_t>{50, 900, 1000}));
  testing::write_all(tmp.file("ckpt-x.torus"), {'a'});
  testing::write_all(tmp.file("notes.txt"), {'a'});
  EXPECT_EQ(dir.steps().size(), 3u);
}

TEST(CheckpointDir, LatestValidSkipsAndReportsCorruptNewest) {
  TempDir tmp;
  CheckpointDir dir(tmp.str(), 5);
  for (int64_t step : {100, 200, 300}) dir.save(step, writer_for(step));
  corrupt(dir.path_for(300));
  std::vector<SkippedCheckpoint> skipped;
  auto found = dir.latest_valid(&skipped);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->step, 200);
  EXPECT_EQ(found->reader->metadata()["step"], 200);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].step, 300);
  EXPECT_NE(skipped[0].reason.find("checksum mismatch"), std::string::npos) << skipped[0].reason;

  corrupt(dir.path_for(200));
  corrupt(dir.path_for(100));
  skipped.clear();
  EXPECT_FALSE(dir.latest_valid(&skipped).has_value());
  EXPECT_EQ(skipped.size(), 3u);
}

TEST(CheckpointDir, EmptyFolderHasNoCheckpoint) {
  TempDir tmp;
  CheckpointDir dir(tmp.file("sub/dir"), 2);
  EXPECT_TRUE(std::filesystem::is_directory(tmp.file("sub/dir")));
  EXPECT_FALSE(dir.latest_valid().has_value());
}

TEST(CheckpointDir, KeepsLastKAndRemovesStaleTemps) {
  TempDir tmp;
  CheckpointDir dir(tmp.str(), 2);
  // A writer that crashed after staging leaves a temp file behind.
  {
    auto staged = writer_for(1).stage(dir.path_for(1));
    std::filesystem::copy_file(staged.temp_path(), staged.temp_path() + "-copy");
  }
  for (int64_t step = 10; step <= 50; step += 10) dir.save(step, writer_for(step));
  EXPECT_EQ(dir.steps(), (std::vector<int64_t>{40, 50}));
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(tmp.str())) ++files;
  EXPECT_EQ(files, 2u);
}

TEST(CheckpointDir, BadKeepIsInvalidArgument) {
  TempDir tmp;
  EXPECT_THROW(CheckpointDir(tmp.str(), 0), InvalidArgument);
}

}  // namespace
}  // namespace torus::worker::checkpoint
