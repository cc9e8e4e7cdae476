#pragma once
// Helpers for checkpoint tests: a temp folder and raw file edits.
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace torus::worker::checkpoint::testing {

// A temp folder for these tests (tests/support/temp_dir.h), named so a leftover one says whose it is.
class TempDir : public torus::test::TempDir {
 public:
  TempDir() : torus::test::TempDir("torus-ckpt-test") {}
};

inline std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace torus::worker::checkpoint::testing
