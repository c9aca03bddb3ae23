// is_executable_program: stat(2) and access(2) on the entry or on each PATH candidate. The
// environment is passed in, not read from ::environ, so that tests can give their own PATH.

#include "agent/cli/program_search.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

namespace ddp::agent {

bool is_executable_program(const std::string& entry,
                           const std::map<std::string, std::string>& env) {
  const auto executable = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0 && ::access(path.c_str(), X_OK) == 0;
  };
  if (entry.find('/') != std::string::npos || ::access(entry.c_str(), F_OK) == 0) {
    return executable(entry);
  }
  const auto path = env.find("PATH");
  if (path == env.end()) return false;
  std::string_view dirs = path->second;
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty() && executable(fmt::format("{}/{}", dir, entry))) return true;
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
  }
  return false;
}

}  // namespace ddp::agent
