#pragma once
// TempDir: the unit tests' scratch directory, a fresh "$TMPDIR/<prefix>_XXXXXX" removed with
// everything in it when the test ends. Every unit test program uses this one.

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace ddp::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ddp_test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::filesystem::filesystem_error("mkdtemp", pattern,
                                              std::error_code(errno, std::generic_category()));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // "<path>/<name>"; `name` may hold folders.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to file(name), creating the folders it names.
  void write(const std::string& name, const std::string& text) const {
    const std::filesystem::path target = file(name);
    std::filesystem::create_directories(target.parent_path());
    std::ofstream(target) << text;
  }

 private:
  std::string path_;
};

}  // namespace ddp::test
