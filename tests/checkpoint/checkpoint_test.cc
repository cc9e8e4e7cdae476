#include "worker/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "common/util/error.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace torus::worker::checkpoint {
namespace {

using testing::TempDir;

std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + static_cast<size_t>(seed) * 17) & 0xFF);
  return v;
}

CheckpointWriter sample_writer(int seed) {
  CheckpointWriter w;
  w.add_section("params", pattern(10000, seed));
  w.add_section("optimizer", pattern(5000, seed + 1));
  w.add_section("empty", std::vector<std::byte>{});
  const float rng_state[4] = {1.5f, 2.5f, static_cast<float>(seed), 4.5f};
  w.add_section("rng", rng_state, sizeof(rng_state));
  w.set_metadata({{"model_signature", "resnet9-8-16-32-64"}, {"step", seed}, {"epoch", 2}});
  return w;
}

std::string what_of(const std::string& path) {
  try {
    CheckpointReader r(path);
  } catch (const CorruptData& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Checkpoint, RoundTrip) {
  TempDir dir;
  const std::string path = dir.file("a.torus");
  sample_writer(7).commit(path);
  CheckpointReader r(path);
  EXPECT_EQ(r.version(), kFormatVersion);
  const auto params = r.section("params");
  const auto expected = pattern(10000, 7);
  ASSERT_EQ(params.size(), expected.size());
  EXPECT_EQ(std::memcmp(params.data(), expected.data(), expected.size()), 0);
  EXPECT_EQ(r.section("optimizer").size(), 5000u);
  EXPECT_EQ(r.section("empty").size(), 0u);
  float rng[4];
  std::memcpy(rng, r.section("rng").data(), sizeof(rng));
  EXPECT_EQ(rng[2], 7.0f);
  EXPECT_EQ(r.metadata()["step"], 7);
  EXPECT_EQ(r.metadata()["model_signature"], "resnet9-8-16-32-64");
  EXPECT_TRUE(r.has_section("params"));
  EXPECT_FALSE(r.has_section("nope"));
  EXPECT_NO_THROW(check_model_signature(r, "resnet9-8-16-32-64"));
}

TEST(Checkpoint, MissingSectionAndSignatureMismatchAreExplained) {
  TempDir dir;
  const std::string path = dir.file("a.torus");
  sample_writer(1).commit(path);
  CheckpointReader r(path);
  try {
    r.section("bn_stats");
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_TRUE(contains(e.what(), path + ": missing section bn_stats")) << e.what();
  }
  try {
    check_model_signature(r, "resnet18-cifar");
    FAIL();
  } catch (const CorruptData& e) {
    EXPECT_TRUE(contains(e.what(), "model signature mismatch: expected resnet18-cifar, found resnet9-8-16-32-64"))
        << e.what();
  }
}

TEST(Checkpoint, WriterRejectsBadNames) {
  CheckpointWriter w;
  w.add_section("a", pattern(3, 0));
  EXPECT_THROW(w.add_section("a", pattern(3, 0)), InvalidArgument);
  EXPECT_THROW(w.add_section("", pattern(3, 0)), InvalidArgument);
  EXPECT_THROW(w.add_section("metadata", pattern(3, 0)), InvalidArgument);
  EXPECT_THROW(w.set_metadata(nlohmann::json::array()), InvalidArgument);
}

// A crash before rename: the staged temp file never replaces the old checkpoint.
TEST(Checkpoint, UnpublishedStageLeavesOldFileIntact) {
  TempDir dir;
  const std::string path = dir.file("ckpt.torus");
  sample_writer(1).commit(path);
  const auto before = testing::read_all(path);
  {
    StagedCheckpoint staged = sample_writer(2).stage(path);
    EXPECT_TRUE(std::filesystem::exists(staged.temp_path()));
    EXPECT_EQ(testing::read_all(path), before);
    EXPECT_EQ(CheckpointReader(path).metadata()["step"], 1);
    // Even the staged file verifies: it was completely written and fsynced.
    EXPECT_EQ(CheckpointReader(staged.temp_path()).metadata()["step"], 2);
  }  // dropped without publish()
  EXPECT_EQ(testing::read_all(path), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.str()), std::filesystem::directory_iterator()), 1);
  sample_writer(3).commit(path);
  EXPECT_EQ(CheckpointReader(path).metadata()["step"], 3);
}

TEST(Checkpoint, EveryByteFlipInEverySectionIsNamed) {
  TempDir dir;
  const std::string path = dir.file("a.torus");
  sample_writer(4).commit(path);
  const auto good = testing::read_all(path);
  std::vector<std::string> names;
  std::vector<std::pair<size_t, size_t>> spans;  // (offset, size) of each non-empty section
  {
    CheckpointReader r(path);
    const auto* base = reinterpret_cast<const std::byte*>(r.section("metadata").data()) - 40;  // header is 40 bytes
    for (const auto& name : r.section_names()) {
      const auto s = r.section(name);
      if (s.empty()) continue;
      names.push_back(name);
      spans.emplace_back(static_cast<size_t>(s.data() - base), s.size());
    }
  }
  ASSERT_EQ(names.size(), 4u);  // metadata, optimizer, params, rng
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t at : {spans[i].first, spans[i].first + spans[i].second / 2, spans[i].first + spans[i].second - 1}) {
      auto bad = good;
      bad[at] = static_cast<char>(bad[at] ^ 0x01);
      testing::write_all(path, bad);
      const std::string what = what_of(path);
      EXPECT_TRUE(contains(what, path + ": checksum mismatch in section " + names[i])) << what;
    }
  }
}

TEST(Checkpoint, HeaderTableAndFooterDamageIsDetected) {
  TempDir dir;
  const std::string path = dir.file("a.torus");
  sample_writer(4).commit(path);
  const auto good = testing::read_all(path);
  // Every single byte outside the sections: header, table, footer. Whatever the message, it must refuse.
  size_t data_end = 0;
  {
    CheckpointReader r(path);
    const auto* base = reinterpret_cast<const std::byte*>(r.section("metadata").data()) - 40;
    for (const auto& name : r.section_names()) {
      const auto s = r.section(name);
      data_end = std::max(data_end, static_cast<size_t>(s.data() - base) + s.size());
    }
  }
  std::vector<size_t> positions;
  for (size_t i = 0; i < 40; ++i) positions.push_back(i);
  for (size_t i = data_end; i < good.size(); ++i) positions.push_back(i);
  for (size_t at : positions) {
    auto bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    testing::write_all(path, bad);
    EXPECT_FALSE(what_of(path).empty()) << "byte " << at << " flipped was not detected";
  }
}

TEST(Checkpoint, TruncationBadMagicAndVersionAreNamed) {
  TempDir dir;
  const std::string path = dir.file("a.torus");
  sample_writer(4).commit(path);
  const auto good = testing::read_all(path);

  for (size_t keep : {good.size() - 1, good.size() / 2, size_t{50}, size_t{10}}) {
    testing::write_all(path, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(keep)));
    EXPECT_TRUE(contains(what_of(path), path + ": truncated")) << keep << ": " << what_of(path);
  }
  testing::write_all(path, {});
  EXPECT_TRUE(contains(what_of(path), "truncated: 0 bytes")) << what_of(path);

  auto magic = good;
  magic[0] = 'X';
  testing::write_all(path, magic);
  EXPECT_TRUE(contains(what_of(path), path + ": bad magic")) << what_of(path);

  auto version = good;
  version[8] = 9;
  testing::write_all(path, version);
  EXPECT_TRUE(contains(what_of(path), path + ": unsupported format version 9")) << what_of(path);

  auto longer = good;
  longer.push_back('x');
  testing::write_all(path, longer);
  EXPECT_TRUE(contains(what_of(path), "1 unexpected bytes")) << what_of(path);
}

TEST(Checkpoint, MissingFileIsSystemError) {
  EXPECT_THROW(CheckpointReader("/nonexistent/torus/ckpt.torus"), SystemError);
}

}  // namespace
}  // namespace torus::worker::checkpoint
