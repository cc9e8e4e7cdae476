#pragma once
// A fresh folder under the system temp directory, made by mkdtemp(3) so that no two tests (nor a test and the
// leftovers of an earlier run with a recycled pid) can ever share one; removed with everything in it at the end.
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace torus::test {

class TempDir {
 public:
  // kKeep leaves the folder behind (an end-to-end fixture keeps its daemons' logs when a test failed).
  enum class OnExit { kRemove, kKeep };

  explicit TempDir(const std::string& prefix = "torus-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    path_ = buffer.data();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (on_exit_ == OnExit::kKeep) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  void set_on_exit(OnExit on_exit) { on_exit_ = on_exit; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` in this folder and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return file(name);
  }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  OnExit on_exit_ = OnExit::kRemove;
};

}  // namespace torus::test
