#pragma once
// A scratch directory for the trainer's unit tests, removed with everything in it at the end.

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ddp::train::test {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    std::string templ = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
    path = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace ddp::train::test
