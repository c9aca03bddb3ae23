// ddp-bench-stamp DIR: writes the wall-clock time it started (seconds since the epoch, nanosecond
// digits) to DIR/world<WORLD_SIZE>_rank<RANK>. The worker of scripts/bench/rendezvous.sh: one
// exec, where `sh -c 'date ...'` costs three.
//
// ddp-bench-stamp --as-agent DIR: the least an agent can do: starts `ddp-bench-stamp DIR` with its
// own environment (posix_spawn), waits for it and exits with its status. rendezvous.sh's `floor`
// starts K of these to measure what starting K agents and their workers costs on the machine
// without any rendezvous.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern char** environ;

namespace {

int usage() {
  std::fprintf(stderr, "usage: ddp-bench-stamp [--as-agent] DIR (under a launcher that sets "
                       "WORLD_SIZE and RANK)\n");
  return 2;
}

int write_stamp(const char* dir) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const char* world = std::getenv("WORLD_SIZE");
  const char* rank = std::getenv("RANK");
  if (world == nullptr || rank == nullptr) return usage();
  char path[4096];
  char line[64];
  std::snprintf(path, sizeof path, "%s/world%s_rank%s", dir, world, rank);
  const int n = std::snprintf(line, sizeof line, "%lld.%09ld\n",
                              static_cast<long long>(now.tv_sec), now.tv_nsec);
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line, static_cast<std::size_t>(n)) != n || ::close(fd) != 0) {
    std::perror(path);
    return 1;
  }
  return 0;
}

int run_as_agent(char* self, char* dir) {
  char* argv[] = {self, dir, nullptr};
  pid_t pid = 0;
  if (const int err = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, environ);
      err != 0) {
    std::fprintf(stderr, "ddp-bench-stamp: cannot start itself: %s\n", std::strerror(err));
    return 1;
  }
  int status = 0;
  pid_t waited = 0;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  return waited == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) return write_stamp(argv[1]);
  if (argc == 3 && std::strcmp(argv[1], "--as-agent") == 0) return run_as_agent(argv[0], argv[2]);
  return usage();
}
