// ddp-bench-stamp DIR: writes the wall-clock time it started (seconds since the epoch, nanosecond
// digits) to DIR/world<WORLD_SIZE>_rank<RANK>. The worker of scripts/bench/rendezvous.sh: one
// exec, where `sh -c 'date ...'` costs three.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

int main(int argc, char** argv) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  if (argc != 2 || world == nullptr || rank == nullptr) {
    std::fprintf(stderr, "usage: ddp-bench-stamp DIR (under a launcher that sets WORLD_SIZE and "
                         "RANK)\n");
    return 2;
  }
  char path[4096];
  char line[64];
  std::snprintf(path, sizeof path, "%s/world%s_rank%s", argv[1], world, rank);
  const int n = std::snprintf(line, sizeof line, "%lld.%09ld\n",
                              static_cast<long long>(now.tv_sec), now.tv_nsec);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line, static_cast<std::size_t>(n)) != n || ::close(fd) != 0) {
    std::perror(path);
    return 1;
  }
  return 0;
}
