#pragma once
// A fresh folder under the system temp directory, removed with everything in it when the test ends.
#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace torus::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "torus-test") {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace torus::test
