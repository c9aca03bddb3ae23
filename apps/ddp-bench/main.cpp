// ddp-bench: the benchmark front door. `ddp-bench <name> args...` runs the sibling executable
// `ddp-bench-<name>` (like git's subcommands), so each benchmark is a program of its own.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const fs::path dir = fs::read_symlink("/proc/self/exe").parent_path();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf("usage: ddp-bench <benchmark> [args...]\nbenchmarks:");
    for (const auto& entry : fs::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("ddp-bench-", 0) == 0) std::printf(" %s", name.substr(10).c_str());
    }
    std::printf("\n");
    return argc < 2 ? 2 : 0;
  }
  const std::string program = (dir / ("ddp-bench-" + std::string(argv[1]))).string();
  std::vector<char*> args{const_cast<char*>(program.c_str())};
  for (int i = 2; i <= argc; ++i) args.push_back(argv[i]);  // argv[argc] is the null terminator
  execv(program.c_str(), args.data());
  std::fprintf(stderr, "ddp-bench: unknown benchmark '%s' (%s: %s)\n", argv[1], program.c_str(),
               std::strerror(errno));
  return 2;
}
