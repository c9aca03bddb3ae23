#pragma once
// WorkerGroup: the processes of one attempt on this node. Spawns them (vfork-style clone + exec, own process
// group each, parent-death signal), routes their output line by line (console, tee, redirect
// files), keeps the last lines of every worker's stderr, and learns of exits on the io_context
// (pidfd or SIGCHLD; never a polling sleep). If the agent dies, even by SIGKILL, every worker and
// grandchild dies within a second.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/worker_spec.hpp"

namespace ddp::agent {

struct WorkerExit {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the terminating signal, 0 when the worker exited normally
  std::chrono::system_clock::time_point wall_time;  // when the agent learned of the exit
  std::chrono::steady_clock::time_point mono_time;
  bool stopped_by_agent = false;  // the agent sent the signal that ended it (stop())
  int agent_signal = 0;           // the last signal the agent sent it (0: none)
  bool oom_suspected = false;     // SIGKILL while the cgroup's oom_kill counter rose
  std::vector<std::string> stderr_tail;  // last 20 lines of its stderr, always captured
  std::string error_file;                // spec.error_file (may not exist)

  bool failed() const { return signal != 0 || exit_code != 0; }
};

struct OutputOptions {
  std::string host;    // for "[host:rank]" prefixes
  bool label = false;  // --label: prefix every console line with "[host:rank]: "
  // torchrun's tee prefix "[<role>N]:" is applied to teed streams; "" = "[default<local_rank>]:"
  std::string log_line_prefix_template;
  // Where console lines go (the agent's own stdout and stderr; tests pass pipes).
  int stdout_fd = 1;
  int stderr_fd = 2;
};

class WorkerGroup {
 public:
  WorkerGroup(boost::asio::io_context& io, OutputOptions options);
  ~WorkerGroup();  // kills (SIGKILL) whatever still runs
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Spawns every spec (log dirs already prepared). Throws IoError naming argv[0] when exec fails
  // (reported through a CLOEXEC pipe, so a missing program is an error, not exit 127).
  void start(const std::vector<WorkerSpec>& specs);

  // Completes when the first worker fails (returns that exit) or when every worker has exited
  // successfully (returns nullopt). Cancellable (per-operation cancellation).
  boost::asio::awaitable<std::optional<WorkerExit>> wait_first_failure();

  // Sends `signal` to every running worker's process group.
  void signal_all(int signal);

  // Sends `signal` to every running worker's process group, waits up to `grace` for them to
  // exit, then SIGKILLs the process groups, waits for every exit and drains their output.
  // Returns every worker's exit, in order of time. Idempotent.
  boost::asio::awaitable<std::vector<WorkerExit>> stop(int signal,
                                                       std::chrono::milliseconds grace);

  // Every exit seen so far, in order of time.
  const std::vector<WorkerExit>& exits() const;
  std::vector<pid_t> pids() const;
  bool running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes this process a child subreaper (grandchildren whose parent dies are reparented to us and
// reaped), starts the orphan guard's watchdog, and ignores SIGPIPE (a closed console must not
// kill the agent). Call once from main before any worker starts. Throws IoError if the kernel
// refuses the subreaper attribute.
void become_child_subreaper();

}  // namespace ddp::agent
