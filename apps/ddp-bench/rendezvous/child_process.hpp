#pragma once
// The rendezvous simulation's processes, seen from its driver: start a program with its stdin
// and stdout on pipes, exchange lines with a deadline, stop it; and a process's CPU time from
// /proc/<pid>/stat. Linux only (child_process_linux.cpp); blocking, for the driver's one thread.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddp::bench {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv; stderr is inherited. Throws Error naming the program.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // SIGKILLs the process if it still runs, and reaps it
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes `line` and a newline to its stdin.
  void send(const std::string& line);
  // The next line of its stdout (without the newline); nullopt at end of file or at `deadline`.
  std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline);
  pid_t pid() const { return pid_; }
  // SIGTERM, then waits for it to exit (up to `grace`, then SIGKILL).
  void stop(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
  int in_ = -1;   // its stdin
  int out_ = -1;  // its stdout
  std::string buffered_;
};

// User plus system CPU seconds the process has used; nullopt when /proc does not say.
std::optional<double> process_cpu_seconds(pid_t pid);

}  // namespace ddp::bench
