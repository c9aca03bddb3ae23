// ddp-bench progress [--collectives N] [--reads N]: the cost of ProgressWriter::on_issue plus
// on_complete (one collective, as libddp's ProgressGroup publishes it) and of
// read_progress_record (one rank, one detector tick), in nanoseconds, on a file in $TMPDIR.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/progress_record.hpp"

namespace {

using Clock = std::chrono::steady_clock;

long arg_or(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const long collectives = arg_or(argc, argv, "--collectives", 5'000'000);
  const long reads = arg_or(argc, argv, "--reads", 200'000);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ddp-bench-progress-" + std::to_string(::getpid())))
                               .string();
  double publish_ns = 0;
  double read_ns = 0;
  {
    ddp::ProgressWriter writer(path);
    if (!writer.is_open()) {
      std::fprintf(stderr, "ddp-bench progress: cannot create %s\n", path.c_str());
      return 1;
    }
    auto start = Clock::now();
    for (long i = 0; i < collectives; ++i) {
      writer.on_issue("all_reduce");
      writer.on_complete();
    }
    publish_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                 static_cast<double>(collectives);
    start = Clock::now();
    std::uint64_t seen = 0;
    for (long i = 0; i < reads; ++i) seen += ddp::read_progress_record(path)->seq;
    read_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
              static_cast<double>(reads);
    if (seen == 0) return 1;
  }
  std::filesystem::remove(path);
  std::printf("progress publish (on_issue + on_complete): %.1f ns per collective (%ld)\n",
              publish_ns, collectives);
  std::printf("progress read (read_progress_record): %.0f ns per rank per tick (%ld)\n", read_ns,
              reads);
  return 0;
}
