#include "tests/apiserver/runtime/tar_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "common/util/error.h"

namespace torus::standin {
namespace {

constexpr size_t kBlock = 512;

// A numeric field: octal text, or base-256 when the first byte's high bit is set (GNU, for large values).
uint64_t number(const char* field, size_t size) {
  if (static_cast<unsigned char>(field[0]) & 0x80) {
    uint64_t v = static_cast<unsigned char>(field[0]) & 0x7f;
    for (size_t i = 1; i < size; ++i) v = (v << 8) | static_cast<unsigned char>(field[i]);
    return v;
  }
  uint64_t v = 0;
  for (size_t i = 0; i < size && field[i] != '\0'; ++i) {
    if (field[i] == ' ') continue;
    if (field[i] < '0' || field[i] > '7')
      throw CorruptData("tar: a number field holds '" + std::string(1, field[i]) + "'");
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  return v;
}

std::string text(const char* field, size_t size) { return std::string(field, strnlen(field, size)); }

// "LEN key=value\n" records of a pax extended header.
std::map<std::string, std::string> pax_records(const std::string& data) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < data.size()) {
    const size_t space = data.find(' ', at);
    if (space == std::string::npos) break;
    const size_t length = std::stoul(data.substr(at, space - at));
    if (length == 0 || at + length > data.size()) throw CorruptData("tar: a pax record's length runs past its header");
    const std::string record = data.substr(space + 1, at + length - space - 2);  // without the newline
    const size_t eq = record.find('=');
    if (eq != std::string::npos) out[record.substr(0, eq)] = record.substr(eq + 1);
    at += length;
  }
  return out;
}

std::string clean(std::string path) {
  while (path.rfind("./", 0) == 0) path.erase(0, 2);
  while (!path.empty() && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

TarReader::TarReader(const std::filesystem::path& file) : file_(file) {
  gz_ = gzopen(file.c_str(), "rb");
  if (gz_ == nullptr) throw_errno("tar: cannot open " + file.string());
  gzbuffer(gz_, 1 << 20);
}

TarReader::~TarReader() {
  if (gz_ != nullptr) gzclose(gz_);
}

std::string TarReader::describe() const { return current_.empty() ? file_.string() : file_.string() + ": " + current_; }

void TarReader::read_exact(char* out, size_t n) {
  while (n > 0) {
    const int got = gzread(gz_, out, static_cast<unsigned>(std::min<size_t>(n, 1u << 30)));
    if (got <= 0) {
      int code = 0;
      const char* message = gzerror(gz_, &code);
      throw CorruptData("tar: " + describe() + ": truncated (" + (code != 0 ? message : "end of file") + ")");
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
}

void TarReader::skip(uint64_t n) {
  char buffer[64 * 1024];
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof(buffer)));
    read_exact(buffer, chunk);
    n -= chunk;
  }
}

std::string TarReader::read_block_data(uint64_t size) {
  std::string data(size, '\0');
  read_exact(data.data(), data.size());
  skip((kBlock - size % kBlock) % kBlock);
  return data;
}

bool TarReader::next(TarEntry& entry) {
  skip(remaining_ + padding_);
  remaining_ = padding_ = 0;
  std::map<std::string, std::string> pax;
  std::string long_name, long_link;
  for (;;) {
    char h[kBlock];
    const int got = gzread(gz_, h, kBlock);
    if (got == 0) return false;  // some writers stop without the two zero blocks
    if (got != static_cast<int>(kBlock)) throw CorruptData("tar: " + file_.string() + ": a header is cut short");
    if (std::all_of(h, h + kBlock, [](char c) { return c == '\0'; })) return false;
    uint64_t sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (sum != number(h + 148, 8)) throw CorruptData("tar: " + file_.string() + ": a header's checksum is wrong");
    const char type = h[156];
    const uint64_t size = number(h + 124, 12);
    if (type == 'x') {
      for (auto& [k, v] : pax_records(read_block_data(size))) pax[k] = v;
      continue;
    }
    if (type == 'g') {  // global pax header: nothing in it that changes how entries unpack
      read_block_data(size);
      continue;
    }
    if (type == 'L' || type == 'K') {
      std::string name = read_block_data(size);
      name.resize(strnlen(name.data(), name.size()));
      (type == 'L' ? long_name : long_link) = name;
      continue;
    }
    std::string path = text(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') path = text(h + 345, 155) + "/" + path;
    if (!long_name.empty()) path = long_name;
    if (pax.count("path")) path = pax["path"];
    entry = TarEntry{};
    entry.path = clean(path);
    entry.mode = static_cast<uint32_t>(number(h + 100, 8) & 07777);
    entry.uid = static_cast<uint32_t>(pax.count("uid") ? std::stoull(pax["uid"]) : number(h + 108, 8));
    entry.gid = static_cast<uint32_t>(pax.count("gid") ? std::stoull(pax["gid"]) : number(h + 116, 8));
    entry.size = pax.count("size") ? std::stoull(pax["size"]) : size;
    entry.link = pax.count("linkpath") ? pax["linkpath"] : !long_link.empty() ? long_link : text(h + 157, 100);
    switch (type) {
      case '0':
      case '\0':
      case '7':
        entry.type = TarEntry::Type::kFile;
        break;
      case '5':
        entry.type = TarEntry::Type::kDirectory;
        break;
      case '2':
        entry.type = TarEntry::Type::kSymlink;
        break;
      case '1':
        entry.type = TarEntry::Type::kHardlink;
        entry.link = clean(entry.link);
        break;
      default:
        entry.type = TarEntry::Type::kOther;  // devices and FIFOs: a runtime's rootless unpack skips them too
    }
    // Only a regular file's data follows its header (POSIX: the size of links, folders and devices is ignored).
    if (entry.type != TarEntry::Type::kFile) entry.size = 0;
    current_ = entry.path;
    remaining_ = entry.size;
    padding_ = (kBlock - entry.size % kBlock) % kBlock;
    return true;
  }
}

std::string TarReader::read_data() {
  std::string data(remaining_, '\0');
  read_exact(data.data(), data.size());
  remaining_ = 0;
  return data;
}

void TarReader::copy_data(int fd) {
  char buffer[256 * 1024];
  while (remaining_ > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(remaining_, sizeof(buffer)));
    read_exact(buffer, chunk);
    for (size_t done = 0; done < chunk;) {
      const ssize_t wrote = ::write(fd, buffer + done, chunk - done);
      if (wrote < 0) throw_errno("tar: writing " + describe());
      done += static_cast<size_t>(wrote);
    }
    remaining_ -= chunk;
  }
}

}  // namespace torus::standin
