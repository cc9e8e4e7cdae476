#pragma once
// Reads a tar archive, plain or gzip-compressed (zlib tells them apart), one entry at a time: what a container
// runtime does with an image archive and with each of its layers. ustar headers, POSIX pax extended headers (path,
// linkpath, size, uid, gid) and GNU long names are understood; base-256 numbers too.
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace torus::standin {

struct TarEntry {
  enum class Type { kFile, kDirectory, kSymlink, kHardlink, kOther };
  std::string path;  // as written, without a leading "./"
  Type type = Type::kFile;
  uint32_t mode = 0;  // permission bits, setuid/setgid/sticky included
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;
  std::string link;  // kSymlink: the target; kHardlink: the entry it names
};

class TarReader {
 public:
  explicit TarReader(const std::filesystem::path& file);  // throws SystemError naming the file
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;

  // The next entry, false at the end of the archive. The entry's data must be consumed (read_data, copy_data) or is
  // skipped by the next call. Throws CorruptData naming the file and the entry.
  bool next(TarEntry& entry);
  std::string read_data();       // the whole data of the current entry
  void copy_data(int fd);        // the data of the current entry, written to fd
  std::string describe() const;  // "FILE" or "FILE: PATH" of the current entry, for errors

 private:
  void read_exact(char* out, size_t n);
  void skip(uint64_t n);
  std::string read_block_data(uint64_t size);

  std::filesystem::path file_;
  gzFile gz_ = nullptr;
  std::string current_;
  uint64_t remaining_ = 0;  // data bytes of the current entry not consumed yet
  uint64_t padding_ = 0;    // then the zeros up to the next 512-byte block
};

}  // namespace torus::standin
