#include "worker/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>

#include "common/log/log.h"
#include "common/util/error.h"

namespace torus::worker::checkpoint {
namespace {

constexpr char kMagic[8] = {'T', 'O', 'R', 'U', 'S', 'C', 'K', 'P'};
constexpr char kEndMagic[8] = {'T', 'O', 'R', 'U', 'S', 'E', 'N', 'D'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + 8;
constexpr size_t kDigestSize = 32;
constexpr size_t kFooterSize = kDigestSize + 8;

using Digest = std::array<unsigned char, kDigestSize>;

// Incremental SHA-256 (OpenSSL EVP), RAII over EVP_MD_CTX.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) throw SystemError("OpenSSL: SHA-256 init failed");
  }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  void update(const void* data, size_t size) {
    if (size > 0 && EVP_DigestUpdate(ctx_, data, size) != 1) throw SystemError("OpenSSL: SHA-256 update failed");
  }
  Digest finish() {
    Digest d{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_, d.data(), &len) != 1 || len != kDigestSize) {
      throw SystemError("OpenSSL: SHA-256 final failed");
    }
    return d;
  }

 private:
  EVP_MD_CTX* ctx_;
};

Digest sha256(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.finish();
}

void put_u32(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}
void put_bytes(std::vector<std::byte>& out, const void* data, size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  out.insert(out.end(), p, p + size);
}
uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now so the caller sees close() errors (deferred write errors on some file systems).
  void close_checked(const std::string& what) {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno(what);
  }

 private:
  int fd_;
};

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(path + ": write");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno(dir + ": open directory for fsync");
  if (::fsync(fd.get()) != 0) throw_errno(dir + ": fsync directory");
}

std::string parent_dir(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

std::string hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    s += digits[d[i] >> 4];
    s += digits[d[i] & 15];
  }
  return s;
}

}  // namespace

// ---- StagedCheckpoint ----

StagedCheckpoint::StagedCheckpoint(std::string temp_path, std::string final_path)
    : temp_path_(std::move(temp_path)), final_path_(std::move(final_path)) {}

StagedCheckpoint::StagedCheckpoint(StagedCheckpoint&& other) noexcept
    : temp_path_(std::move(other.temp_path_)), final_path_(std::move(other.final_path_)) {
  other.temp_path_.clear();
}

StagedCheckpoint::~StagedCheckpoint() {
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());  // never published: the old checkpoint stays
}

void StagedCheckpoint::publish() {
  if (temp_path_.empty()) throw InvalidArgument(final_path_ + ": checkpoint already published");
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) throw_errno(final_path_ + ": rename from " + temp_path_);
  temp_path_.clear();
  fsync_dir(parent_dir(final_path_));
}

// ---- CheckpointWriter ----

void CheckpointWriter::add_section(const std::string& name, std::vector<std::byte>&& bytes) {
  if (name.empty()) throw InvalidArgument("checkpoint section name: must not be empty");
  if (name == kMetadataSection)
    throw InvalidArgument("checkpoint section name: \"metadata\" is reserved; use set_metadata");
  for (const auto& [existing, unused] : sections_) {
    if (existing == name) throw InvalidArgument("checkpoint section name: duplicate section \"" + name + "\"");
  }
  sections_.emplace_back(name, std::move(bytes));
}

void CheckpointWriter::add_section(const std::string& name, std::span<const std::byte> bytes) {
  add_section(name, std::vector<std::byte>(bytes.begin(), bytes.end()));
}

void CheckpointWriter::add_section(const std::string& name, const void* data, size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  add_section(name, std::vector<std::byte>(p, p + size));
}

void CheckpointWriter::set_metadata(const nlohmann::json& metadata) {
  if (!metadata.is_object()) throw InvalidArgument("checkpoint metadata: must be a JSON object");
  metadata_ = metadata;
}

StagedCheckpoint CheckpointWriter::stage(const std::string& path) const {
  const std::string meta = metadata_.dump();
  // (name, bytes) in file order: metadata first.
  std::vector<std::pair<std::string, std::span<const std::byte>>> all;
  all.emplace_back(kMetadataSection, std::span(reinterpret_cast<const std::byte*>(meta.data()), meta.size()));
  for (const auto& [name, bytes] : sections_) all.emplace_back(name, std::span<const std::byte>(bytes));

  std::vector<std::byte> table;
  uint64_t offset = kHeaderSize;
  for (const auto& [name, bytes] : all) {
    put_u32(table, static_cast<uint32_t>(name.size()));
    put_bytes(table, name.data(), name.size());
    put_u64(table, offset);
    put_u64(table, bytes.size());
    const Digest d = sha256(bytes.data(), bytes.size());
    put_bytes(table, d.data(), d.size());
    offset += bytes.size();
  }
  const uint64_t table_offset = offset;
  const uint64_t file_size = table_offset + table.size() + kFooterSize;
  std::vector<std::byte> header;
  put_bytes(header, kMagic, sizeof(kMagic));
  put_u32(header, kFormatVersion);
  put_u32(header, static_cast<uint32_t>(all.size()));
  put_u64(header, file_size);
  put_u64(header, table_offset);
  put_u64(header, table.size());

  StagedCheckpoint staged(temp_name_for(path), path);
  Fd fd(::open(staged.temp_path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) throw_errno(staged.temp_path() + ": create");
  Sha256 whole;
  auto emit = [&](const void* data, size_t size) {
    whole.update(data, size);
    write_all(fd.get(), data, size, staged.temp_path());
  };
  emit(header.data(), header.size());
  for (const auto& [name, bytes] : all) emit(bytes.data(), bytes.size());
  emit(table.data(), table.size());
  const Digest file_digest = whole.finish();
  write_all(fd.get(), file_digest.data(), file_digest.size(), staged.temp_path());
  write_all(fd.get(), kEndMagic, sizeof(kEndMagic), staged.temp_path());
  if (::fsync(fd.get()) != 0) throw_errno(staged.temp_path() + ": fsync");
  fd.close_checked(staged.temp_path() + ": close");
  return staged;
}

void CheckpointWriter::commit(const std::string& path) const { stage(path).publish(); }

// ---- CheckpointReader ----

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno(path + ": open checkpoint");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno(path + ": stat");
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) throw_errno(path + ": mmap");
    data_ = static_cast<const std::byte*>(p);
  }
  try {
    verify();
  } catch (...) {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    throw;
  }
}

CheckpointReader::~CheckpointReader() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

void CheckpointReader::verify() {
  auto corrupt = [this](const std::string& what) { return CorruptData(path_ + ": " + what); };
  if (size_ >= sizeof(kMagic) && std::memcmp(data_, kMagic, sizeof(kMagic)) != 0) {
    throw corrupt("bad magic: not a Torus checkpoint");
  }
  if (size_ < kHeaderSize + kFooterSize) {
    throw corrupt("truncated: " + std::to_string(size_) + " bytes, smaller than header and footer (" +
                  std::to_string(kHeaderSize + kFooterSize) + " bytes)");
  }
  version_ = get_u32(data_ + 8);
  if (version_ != kFormatVersion) {
    throw corrupt("unsupported format version " + std::to_string(version_) + " (this build reads version " +
                  std::to_string(kFormatVersion) + ")");
  }
  const uint32_t count = get_u32(data_ + 12);
  const uint64_t file_size = get_u64(data_ + 16);
  const uint64_t table_offset = get_u64(data_ + 24);
  const uint64_t table_size = get_u64(data_ + 32);
  if (file_size > size_) {
    throw corrupt("truncated: header says " + std::to_string(file_size) + " bytes, file has " + std::to_string(size_));
  }
  if (file_size < size_) {
    throw corrupt(std::to_string(size_ - file_size) + " unexpected bytes after the " + std::to_string(file_size) +
                  "-byte checkpoint");
  }
  const std::byte* footer = data_ + size_ - kFooterSize;
  if (std::memcmp(footer + kDigestSize, kEndMagic, sizeof(kEndMagic)) != 0) {
    throw corrupt("footer magic missing (incomplete or damaged write)");
  }
  if (table_offset < kHeaderSize || table_offset + table_size != size_ - kFooterSize) {
    throw corrupt("section table corrupt: offset " + std::to_string(table_offset) + " + size " +
                  std::to_string(table_size) + " does not end at the footer");
  }
  // Parse the table with bounds checks; then every section's checksum; then the whole file's.
  const std::byte* p = data_ + table_offset;
  const std::byte* end = p + table_size;
  for (uint32_t i = 0; i < count; ++i) {
    if (end - p < 4) throw corrupt("section table corrupt: entry " + std::to_string(i) + " cut short");
    const uint32_t name_len = get_u32(p);
    p += 4;
    if (static_cast<uint64_t>(end - p) < uint64_t{name_len} + 16 + kDigestSize) {
      throw corrupt("section table corrupt: entry " + std::to_string(i) + " cut short");
    }
    std::string name(reinterpret_cast<const char*>(p), name_len);
    p += name_len;
    const uint64_t offset = get_u64(p);
    const uint64_t size = get_u64(p + 8);
    p += 16;
    Digest expected{};
    std::memcpy(expected.data(), p, kDigestSize);
    p += kDigestSize;
    if (offset < kHeaderSize || offset > table_offset || size > table_offset - offset) {
      throw corrupt("section table corrupt: section " + name + " lies outside the data area");
    }
    const Digest found = sha256(data_ + offset, size);
    if (found != expected) {
      throw corrupt("checksum mismatch in section " + name + " (expected sha256 " + hex(expected) + ", found " +
                    hex(found) + ")");
    }
    if (!sections_.emplace(name, Entry{offset, size}).second) {
      throw corrupt("section table corrupt: section " + name + " appears twice");
    }
  }
  if (p != end) throw corrupt("section table corrupt: " + std::to_string(end - p) + " bytes left after the table");
  Digest expected{};
  std::memcpy(expected.data(), footer, kDigestSize);
  if (sha256(data_, size_ - kFooterSize) != expected) {
    throw corrupt("whole-file checksum mismatch (header or section table damaged)");
  }
  const auto meta = section(kMetadataSection);
  metadata_ = nlohmann::json::parse(reinterpret_cast<const char*>(meta.data()),
                                    reinterpret_cast<const char*>(meta.data()) + meta.size(), nullptr, false);
  if (metadata_.is_discarded() || !metadata_.is_object()) throw corrupt("metadata section is not a JSON object");
}

bool CheckpointReader::has_section(const std::string& name) const { return sections_.count(name) > 0; }

std::span<const std::byte> CheckpointReader::section(const std::string& name) const {
  const auto it = sections_.find(name);
  if (it == sections_.end()) throw CorruptData(path_ + ": missing section " + name);
  return {data_ + it->second.offset, static_cast<size_t>(it->second.size)};
}

std::vector<std::string> CheckpointReader::section_names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : sections_) names.push_back(name);
  return names;
}

void check_model_signature(const CheckpointReader& reader, const std::string& expected) {
  const auto& meta = reader.metadata();
  const auto it = meta.find("model_signature");
  if (it == meta.end() || !it->is_string()) {
    throw CorruptData(reader.path() + ": metadata has no model_signature (expected " + expected + ")");
  }
  const std::string found = it->get<std::string>();
  if (found != expected) {
    throw CorruptData(reader.path() + ": model signature mismatch: expected " + expected + ", found " + found);
  }
}

}  // namespace torus::worker::checkpoint
