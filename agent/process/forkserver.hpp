#pragma once
// ForkServer: --start_method=forkserver. One template Python process per node
// (python/ddprun/_forkserver.py) imports the --preload modules once; every worker of every attempt
// is then forked from it instead of exec'd. The template forks a middle process that forks the
// workers of a launch and exits, so the workers' parent becomes the agent (a child subreaper): the
// agent watches, signals and reaps them like exec'd workers. The agent talks to the template over a
// SOCK_SEQPACKET pair, one JSON message per packet
// (requests carry the worker's stdout, stderr and "go" pipe ends with SCM_RIGHTS). Owned by the
// ProcessLauncher for the agent's whole run; runs on the agent's thread and blocks it only while
// the template starts (the preload imports) and for the milliseconds a fork takes.

#include <sys/types.h>

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
  std::chrono::milliseconds ready_timeout{std::chrono::minutes(10)};  // the imports' deadline
};

// The template's environment, from the first worker's spec: the workers' variables without the
// ones ddprun sets per worker (ranks, TORCHELASTIC_*, stack and progress files), keeping
// PYTHONPATH (for `import ddprun`), OMP_NUM_THREADS and the NCCL settings the imports may read.
std::vector<std::string> template_env(const WorkerSpec& first);

class ForkServer {
 public:
  // Starts the template with `env` (template_env()) and blocks until it has imported every
  // preload module. Throws IoError, one line naming the cause: "forkserver: cannot import module
  // 'x': ModuleNotFoundError: No module named 'x'", the template's exit, the ready timeout, or
  // CUDA initialised by the imports (forked workers could not use it).
  ForkServer(const ForkServerOptions& options, const std::vector<std::string>& env);
  ~ForkServer();  // SIGKILLs and reaps the template (workers already forked are not its children)
  ForkServer(const ForkServer&) = delete;
  ForkServer& operator=(const ForkServer&) = delete;

  // True when the template can run `argv`: "<python> -u" and a script, "-m module" or "-c code".
  bool runs(const std::vector<std::string>& argv) const;

  // False once the template has exited (it is reaped then).
  bool is_alive();
  pid_t pid() const { return pid_; }

  // Asks the template for worker `id` of `spec` with `stdout_fd`/`stderr_fd` as its fds 1 and 2.
  // Returns the write end of the worker's go pipe: the worker runs nothing of its own until
  // release() (closing it unreleased makes the worker exit 1). Throws IoError.
  UniqueFd request(int id, const WorkerSpec& spec, int stdout_fd, int stderr_fd);

  // Blocks until the template reports worker `id`'s pid: it is then a child of this process,
  // leading its own process group, waiting for release() (after which it sets its parent-death
  // signal and checks that its parent is still this process). Throws IoError when the template
  // reports an error for it, exits, or says nothing for 60 s.
  pid_t await_pid(int id);

  // Lets a worker that await_pid() returned run its entry point.
  static void release(UniqueFd& go);

 private:
  void await_ready(const std::string& preload, std::chrono::steady_clock::time_point started);
  void kill_template();
  std::string receive(std::chrono::milliseconds timeout, const char* waiting_for);
  [[noreturn]] void fail_exited(const char* waiting_for);

  ForkServerOptions options_;
  pid_t pid_ = -1;
  UniqueFd socket_;                // the agent's end of the pair
  std::map<int, pid_t> reported_;  // pids that arrived before their await_pid
};

}  // namespace ddp::agent
