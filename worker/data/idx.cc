#include "worker/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/util/error.h"

namespace torus::worker::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // u8 data, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // u8 data, 1 dimension

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Closes a gzFile on every path out.
struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

void expect_header(const std::string& path, const std::vector<uint8_t>& bytes, size_t header, uint32_t magic,
                   const char* kind) {
  if (bytes.size() < header) {
    throw CorruptData(path + ": truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                      std::to_string(header) + "-byte IDX " + kind + " header");
  }
  const uint32_t found = big_endian_u32(bytes.data());
  if (found != magic) {
    throw CorruptData(path + ": bad magic number " + hex(found) + ", expected " + hex(magic) + " (IDX " + kind + ")");
  }
}

void expect_size(const std::string& path, size_t found, size_t expected, const std::string& what) {
  if (found < expected) {
    throw CorruptData(path + ": truncated: header says " + what + " (" + std::to_string(expected) +
                      " bytes in all), file has " + std::to_string(found) + " bytes");
  }
  if (found > expected) {
    throw CorruptData(path + ": " + std::to_string(found - expected) + " unexpected trailing bytes after " + what);
  }
}

}  // namespace

std::vector<uint8_t> read_gzip_file(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw InvalidArgument(path + ": cannot open: " + (errno ? std::strerror(errno) : "out of memory"));
  }
  std::vector<uint8_t> out;
  constexpr unsigned kChunk = 1 << 20;
  for (;;) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const int got = gzread(file.get(), out.data() + old, kChunk);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file.get(), &code);
      throw CorruptData(path + ": corrupt gzip data: " + (msg ? msg : "unknown zlib error"));
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const char* msg = gzerror(file.get(), &code);
  if (code != Z_OK) {
    // A stream cut short ends with Z_BUF_ERROR ("unexpected end of file") instead of a clean end.
    throw CorruptData(path + ": truncated or corrupt gzip stream: " + (msg ? msg : "unknown zlib error"));
  }
  return out;
}

IdxImages read_idx_images(const std::string& path) {
  const std::vector<uint8_t> bytes = read_gzip_file(path);
  expect_header(path, bytes, 16, kImagesMagic, "images");
  IdxImages images;
  const uint32_t n = big_endian_u32(&bytes[4]), h = big_endian_u32(&bytes[8]), w = big_endian_u32(&bytes[12]);
  if (n > (1u << 30) || h == 0 || w == 0 || h > 65535 || w > 65535) {
    throw CorruptData(path + ": implausible IDX dimensions " + std::to_string(n) + "x" + std::to_string(h) + "x" +
                      std::to_string(w));
  }
  const size_t data = static_cast<size_t>(n) * h * w;
  expect_size(path, bytes.size(), 16 + data,
              std::to_string(n) + " images of " + std::to_string(h) + "x" + std::to_string(w));
  images.n = static_cast<int>(n);
  images.h = static_cast<int>(h);
  images.w = static_cast<int>(w);
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

std::vector<int32_t> read_idx_labels(const std::string& path, int num_classes) {
  const std::vector<uint8_t> bytes = read_gzip_file(path);
  expect_header(path, bytes, 8, kLabelsMagic, "labels");
  const uint32_t n = big_endian_u32(&bytes[4]);
  expect_size(path, bytes.size(), 8 + static_cast<size_t>(n), std::to_string(n) + " labels");
  std::vector<int32_t> labels(bytes.begin() + 8, bytes.end());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      throw CorruptData(path + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) + ", expected [0, " +
                        std::to_string(num_classes) + ")");
    }
  }
  return labels;
}

std::shared_ptr<ArrayDataset> load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = dir + (split == Split::kTrain ? "/train" : "/t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  IdxImages images = read_idx_images(images_path);
  std::vector<int32_t> labels = read_idx_labels(labels_path, 10);
  if (labels.size() != static_cast<size_t>(images.n)) {
    throw CorruptData(labels_path + ": has " + std::to_string(labels.size()) + " labels but " + images_path + " has " +
                      std::to_string(images.n) + " images");
  }
  return std::make_shared<ArrayDataset>("fashion-mnist " + prefix, images.n, images.h, images.w, 1, 10,
                                        std::move(images.pixels), std::move(labels));
}

}  // namespace torus::worker::data
