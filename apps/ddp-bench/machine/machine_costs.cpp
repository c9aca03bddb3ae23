// ddp-bench-machine [--pages N] [--procs P] [--rounds R]: what this machine charges for the three
// things an agent's start is made of, median of R rounds each:
//   - a page fault: CPU microseconds per first touch of a fresh anonymous page (N pages), by one
//     process alone and by P processes touching theirs at the same moment (process CPU time, not
//     wall time: with P processes on few cores, wall time would count the others' turns);
//   - a switch between two processes: one byte sent back and forth over two pipes by two
//     processes pinned to one CPU, so every round trip is two switches;
//   - a process: posix_spawn of this (static) program, which exits at once, and waitpid.
// On a VM where these exit to the hypervisor they explain what starting many agents costs
// (docs/BENCHMARKS.md, rendezvous).

#include <sched.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "common/parse_number.hpp"

extern char** environ;

namespace {

struct Options {
  long pages = 100;
  int procs = 300;
  int rounds = 3;
};

int usage() {
  std::fprintf(stderr, "usage: ddp-bench-machine [--pages N] [--procs P] [--rounds R]\n");
  return 2;
}

double clock_us(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Touches `pages` fresh pages once each; CPU microseconds per page, or -1 when mmap fails.
double touch_fresh_pages(long pages) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto length = static_cast<std::size_t>(pages * page);
  void* mapped =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return -1;
  auto* bytes = static_cast<volatile char*>(mapped);
  const double start = clock_us(CLOCK_PROCESS_CPUTIME_ID);
  for (long i = 0; i < pages; ++i) bytes[i * page] = 1;
  const double per_page = (clock_us(CLOCK_PROCESS_CPUTIME_ID) - start) / static_cast<double>(pages);
  ::munmap(mapped, length);
  return per_page;
}

// Starts `procs` processes that wait on one pipe, releases them together, and returns the median
// of their CPU microseconds per fault.
double fault_cost(long pages, int procs) {
  int go[2];
  int results[2];
  if (::pipe(go) != 0 || ::pipe(results) != 0) return 0;
  std::vector<pid_t> children;
  for (int i = 0; i < procs; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(go[1]);
      char byte = 0;
      if (::read(go[0], &byte, 1) != 1) ::_exit(1);
      const double per_page = touch_fresh_pages(pages);
      ::_exit(::write(results[1], &per_page, sizeof per_page) == sizeof per_page ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  ::close(go[0]);
  ::close(results[1]);
  const char byte = 1;
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (::write(go[1], &byte, 1) != 1) break;
  }
  ::close(go[1]);
  std::vector<double> per_page;
  double value = 0;
  while (::read(results[0], &value, sizeof value) == sizeof value) {
    if (value >= 0) per_page.push_back(value);
  }
  ::close(results[0]);
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  return median(per_page);
}

// Wall microseconds per round trip of one byte between two processes on one CPU.
double switch_round_trip() {
  constexpr int kTrips = 5000;
  int there[2];
  int back[2];
  if (::pipe(there) != 0 || ::pipe(back) != 0) return 0;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ::sched_setaffinity(0, sizeof one, &one);  // inherited by the echoing child
  char byte = 0;
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int i = 0; i < kTrips; ++i) {
      if (::read(there[0], &byte, 1) != 1 || ::write(back[1], &byte, 1) != 1) ::_exit(1);
    }
    ::_exit(0);
  }
  const double start = clock_us(CLOCK_MONOTONIC);
  for (int i = 0; i < kTrips; ++i) {
    if (::write(there[1], &byte, 1) != 1 || ::read(back[0], &byte, 1) != 1) break;
  }
  const double per_trip = (clock_us(CLOCK_MONOTONIC) - start) / kTrips;
  ::waitpid(pid, nullptr, 0);
  for (int fd : {there[0], there[1], back[0], back[1]}) ::close(fd);
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &all);
  ::sched_setaffinity(0, sizeof all, &all);
  return per_trip;
}

// Wall microseconds to start this program (which exits at once) and reap it.
double process_start(char* self) {
  constexpr int kStarts = 50;
  char exit_now[] = "--exit";
  char* argv[] = {self, exit_now, nullptr};
  const double start = clock_us(CLOCK_MONOTONIC);
  for (int i = 0; i < kStarts; ++i) {
    pid_t pid = 0;
    if (::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, environ) != 0) return 0;
    ::waitpid(pid, nullptr, 0);
  }
  return (clock_us(CLOCK_MONOTONIC) - start) / kStarts;
}

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    const long value = ddp::parse_number<long>(argv[i + 1]).value_or(0);
    if (value <= 0) return false;
    if (std::strcmp(argv[i], "--pages") == 0) {
      options.pages = value;
    } else if (std::strcmp(argv[i], "--procs") == 0) {
      options.procs = static_cast<int>(value);
    } else if (std::strcmp(argv[i], "--rounds") == 0) {
      options.rounds = static_cast<int>(value);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--exit") == 0) return 0;
  Options options;
  if (!parse(argc, argv, options)) return usage();
  std::vector<double> alone;
  std::vector<double> loaded;
  std::vector<double> trips;
  std::vector<double> starts;
  for (int round = 0; round < options.rounds; ++round) {
    alone.push_back(fault_cost(options.pages, 1));
    loaded.push_back(fault_cost(options.pages, options.procs));
    trips.push_back(switch_round_trip());
    starts.push_back(process_start(argv[0]));
  }
  const double a = median(alone);
  const double l = median(loaded);
  std::printf("median of %d rounds:\n", options.rounds);
  std::printf("  page fault, 1 process alone          %8.2f us of CPU (%ld fresh pages)\n", a,
              options.pages);
  std::printf("  page fault, %4d processes at once    %8.2f us of CPU (%.1fx alone)\n",
              options.procs, l, a > 0 ? l / a : 0.0);
  std::printf("  process switch (pipe round trip / 2) %8.2f us\n", median(trips) / 2);
  std::printf("  process start (static, spawn+reap)   %8.2f us\n", median(starts));
  return 0;
}
