#pragma once
// The checkpoint container: a versioned file of named byte sections with SHA-256 checksums, written atomically.
//
//   CheckpointWriter w;
//   w.add_section("params", bytes);                 // any number of named sections
//   w.set_metadata({{"model_signature", sig}, {"step", 1200}});
//   w.commit("/ckpt/ckpt-1200.torus");             // temp file in the same dir, fsync, rename, fsync dir
//
//   CheckpointReader r("/ckpt/ckpt-1200.torus");    // verifies everything up front; throws CorruptData
//   std::span<const std::byte> p = r.section("params");
//   check_model_signature(r, sig);                  // refuses another model's checkpoint
//
// File layout (little-endian), format version 1:
//   header  (40 bytes): magic "TORUSCKP", u32 version, u32 section count, u64 file size,
//                       u64 table offset, u64 table size
//   section bytes, back to back
//   table: per section: u32 name length, name, u64 offset, u64 size, 32-byte SHA-256 of the section
//   footer  (40 bytes): 32-byte SHA-256 of everything before the footer, magic "TORUSEND"
// The metadata is a JSON section named "metadata".
#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace torus::worker::checkpoint {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr const char* kMetadataSection = "metadata";

// A checkpoint written to its temp file and fsynced, not yet visible under its name. Destroying it without
// publish() removes the temp file: the previous checkpoint at that path stays untouched.
class StagedCheckpoint {
 public:
  StagedCheckpoint(std::string temp_path, std::string final_path);
  StagedCheckpoint(StagedCheckpoint&& other) noexcept;
  StagedCheckpoint& operator=(StagedCheckpoint&&) = delete;
  StagedCheckpoint(const StagedCheckpoint&) = delete;
  ~StagedCheckpoint();

  // rename(temp, final) then fsync the directory, so the new name survives a power loss.
  void publish();
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string temp_path_;
  std::string final_path_;
};

class CheckpointWriter {
 public:
  // Throws InvalidArgument on an empty or duplicate name, or the reserved "metadata" name.
  void add_section(const std::string& name, std::span<const std::byte> bytes);
  void add_section(const std::string& name, std::vector<std::byte>&& bytes);
  void add_section(const std::string& name, const void* data, size_t size);
  void set_metadata(const nlohmann::json& metadata);

  // Writes and fsyncs a temp file next to `path`; publish() makes it the checkpoint.
  StagedCheckpoint stage(const std::string& path) const;
  // stage(path).publish(): an atomic replace of `path`.
  void commit(const std::string& path) const;

 private:
  std::vector<std::pair<std::string, std::vector<std::byte>>> sections_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

// Opens and fully verifies a checkpoint (magic, version, sizes, section table, every checksum). Any problem throws
// torus::CorruptData naming the file and exactly what is wrong. The bytes are mmapped read-only.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;
  ~CheckpointReader();

  bool has_section(const std::string& name) const;
  // Throws CorruptData("<file>: missing section <name>") when absent.
  std::span<const std::byte> section(const std::string& name) const;
  std::vector<std::string> section_names() const;
  const nlohmann::json& metadata() const { return metadata_; }
  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    uint64_t offset;
    uint64_t size;
  };
  void verify();

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  std::map<std::string, Entry> sections_;
  nlohmann::json metadata_;
};

// Refuses a checkpoint whose metadata "model_signature" differs from `expected`:
// CorruptData("<file>: model signature mismatch: expected <expected>, found <found>").
void check_model_signature(const CheckpointReader& reader, const std::string& expected);

}  // namespace torus::worker::checkpoint
