#pragma once
// ForkServer: --start_method=forkserver. One template Python process per node
// (python/ddprun/_forkserver.py) imports the --preload modules once; every worker of every attempt
// is then forked from it instead of exec'd, as the agent's child: straight (clone with
// CLONE_PARENT) while the template has one thread, else through a middle process that forks the
// workers of a launch and exits, so that they are reparented to the agent (a child subreaper).
// The agent watches, signals and reaps them like exec'd workers. The agent talks to the template
// over a SOCK_SEQPACKET pair, one JSON message per packet (requests carry the worker's stdout,
// stderr and "go" pipe ends with SCM_RIGHTS). Owned by the ProcessLauncher for the agent's whole
// run; runs on the agent's thread. The template starts without waiting for its imports (the agent
// waits with until_ready() on its loop, see ProcessLauncher::until_prepared); the agent blocks only
// in await_ready() when nobody waited before, and for the milliseconds a fork takes.

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/worker_spec.hpp"
#include "common/unique_fd.hpp"

namespace ddp::agent {

struct ForkServerOptions {
  std::string python;                // the workers' interpreter (--python)
  std::vector<std::string> preload;  // modules the template imports, in order
  bool fallback = false;             // --preload_fallback: exec when the template cannot start
  bool by_default = false;  // implied by --recovery=inprocess, not asked for (the warning says so)
  std::chrono::milliseconds ready_timeout{std::chrono::minutes(10)};  // the imports' deadline
};

// The template's environment, from the first worker's spec: the workers' variables without the
// ones ddprun sets per worker (ranks, TORCHELASTIC_*, stack and progress files), keeping
// PYTHONPATH (for `import ddprun`), OMP_NUM_THREADS and the NCCL settings the imports may read.
std::vector<std::string> template_env(const WorkerSpec& first);

// True when a template of `options` can run `argv`: "<python> -u" and a script, "-m module" or
// "-c code" (anything else is exec'd).
bool runs_in_template(const ForkServerOptions& options, const std::vector<std::string>& argv);

class ForkServer {
 public:
  // Starts the template with `env` (template_env()) and returns while it imports the preload
  // modules. Never throws: a template that cannot start is reported by await_ready().
  ForkServer(const ForkServerOptions& options, const std::vector<std::string>& env);
  ~ForkServer();  // SIGKILLs and reaps the template (workers already forked are not its children)
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  bool runs(const std::vector<std::string>& argv) const { return runs_in_template(options_, argv); }

  // Blocks until the template has imported every preload module; returns at once once it has.
  // Throws IoError, one line naming the cause: "forkserver: cannot import module 'x':
  // ModuleNotFoundError: No module named 'x'", the interpreter's exec, the template's exit, the
  // ready timeout, or CUDA initialised by the imports (forked workers could not use it). The
  // template is gone after a throw, and every later call throws the same line.
  void await_ready();
  bool is_ready() const { return ready_; }
  bool has_failed() const { return !failure_.empty(); }

  // Completes when await_ready() would not block: the template's ready message or its exit is
  // there, or the ready timeout ran out. The caller's loop runs meanwhile. Never throws;
  // cancellable (per-operation cancellation).
  boost::asio::awaitable<void> until_ready();

  // False once the template has exited (it is reaped then).
  bool is_alive();
  pid_t pid() const { return pid_; }

  // Asks the template for worker `id` of `spec` with `stdout_fd`/`stderr_fd` as its fds 1 and 2
  // (after await_ready(), whose IoError it throws). Returns the write end of the worker's go
  // pipe: the worker runs nothing of its own until release() (closing it unreleased makes the
  // worker exit 1). Throws IoError.
  UniqueFd request(int id, const WorkerSpec& spec, int stdout_fd, int stderr_fd);

  // Blocks until the template reports worker `id`'s pid: it is then a child of this process,
  // leading its own process group (set here too), waiting for release() (after which it sets its
  // parent-death signal and checks that its parent is still this process). Throws IoError when the
  // template reports an error for it, exits, or says nothing for 60 s.
  pid_t await_pid(int id);

  // Whether the last worker reported came through a middle process (the template had threads)
  // rather than forked straight as this process's child.
  bool through_middle() const { return through_middle_; }

  // Lets a worker that await_pid() returned run its entry point.
  static void release(UniqueFd& go);

 private:
  void start(const std::vector<std::string>& env);
  std::chrono::steady_clock::time_point ready_deadline() const {
    return started_ + options_.ready_timeout;
  }
  void read_ready_message();
  void kill_template();
  std::string receive(std::chrono::milliseconds timeout, const char* waiting_for);
  [[noreturn]] void fail_exited(const char* waiting_for);
  [[noreturn]] void fail_silent(std::chrono::milliseconds waited, const char* waiting_for);

  ForkServerOptions options_;
  std::chrono::steady_clock::time_point started_;
  bool ready_ = false;
  std::string failure_;  // await_ready()'s error, once it threw
  pid_t pid_ = -1;
  UniqueFd socket_;                // the agent's end of the pair
  std::map<int, pid_t> reported_;  // pids that arrived before their await_pid
  bool through_middle_ = false;
};

}  // namespace ddp::agent
