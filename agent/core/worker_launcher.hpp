#pragma once
// WorkerLauncher: how the agent starts one attempt's workers and what it asks of them (the test
// seam over WorkerGroup). ProcessLauncher (worker_group.hpp) spawns processes; the agent's unit
// tests script the workers' outcomes with a fake (tests/unit/agent/core/fake_launcher.hpp).

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/worker_spec.hpp"

namespace ddp::agent {

struct WorkerExit {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the terminating signal, 0 when the worker exited normally
  std::chrono::system_clock::time_point wall_time;  // when the agent learned of the exit
  std::chrono::steady_clock::time_point mono_time;
  bool stopped_by_agent = false;         // the agent sent the signal that ended it (stop())
  int agent_signal = 0;                  // the last signal the agent sent it (0: none)
  bool oom_suspected = false;            // SIGKILL while the cgroup's oom_kill counter rose
  std::vector<std::string> stderr_tail;  // last 20 lines of its stderr, always captured
  std::string error_file;                // spec.error_file (may not exist)
  bool replaced = false;                 // a new process took its local rank (replace())

  bool failed() const { return signal != 0 || exit_code != 0; }
};

struct OutputOptions {
  std::string host;    // for "[host:rank]" prefixes
  bool label = false;  // --label: prefix every console line with "[host:rank]: "
  // torchrun's tee prefix "[<role>N]:" is applied to teed streams; "" = "[default<local_rank>]:"
  std::string log_line_prefix_template;
  // torchrun's --duplicate_stdout_filters / --duplicate_stderr_filters: the lines of teed,
  // console-visible streams that contain one of these strings are also written, with the tee
  // prefix, to <attempt_dir>/filtered_stdout.log / filtered_stderr.log. Empty: no file.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  std::string attempt_dir;
  // Where console lines go (the agent's own stdout and stderr; tests pass pipes).
  int stdout_fd = 1;
  int stderr_fd = 2;
};

// The workers of one attempt on this node, as the agent drives them. Used on the agent's thread.
class AttemptWorkers {
 public:
  virtual ~AttemptWorkers() = default;  // whatever still runs is killed

  // Completes when the first worker fails (returns that exit) or when every worker has exited
  // successfully (returns nullopt). A replaced exit counts as neither. Cancellable
  // (per-operation cancellation).
  virtual boost::asio::awaitable<std::optional<WorkerExit>> wait_first_failure() = 0;

  // Starts a new process for `spec` in the place of its local rank's worker, which has exited
  // (--recovery=inprocess: its live peers keep running). The old exit stays in exits(), marked
  // `replaced`; pids() names the new process, which wait_first_failure() and stop() watch like
  // the others. Returns its pid. Throws IoError when it cannot be started.
  virtual pid_t replace(const WorkerSpec& spec) = 0;

  // Sends `signal` to every running worker.
  virtual void signal_all(int signal) = 0;

  // Ends the worker of `local_rank` alone (--recovery=inprocess: a hung worker, its live peers
  // keep running): SIGCONT (a stopped process must run to take the signal), `signal`, up to
  // `grace`, then SIGKILL; completes once its exit is in exits(). At once when it has exited.
  virtual boost::asio::awaitable<void> stop_worker(int local_rank, int signal,
                                                   std::chrono::milliseconds grace) = 0;

  // Sends `signal` to every running worker, waits up to `grace`, then kills what remains and
  // waits for every exit. Returns every worker's exit, in order of time. Idempotent.
  virtual boost::asio::awaitable<std::vector<WorkerExit>> stop(int signal,
                                                               std::chrono::milliseconds grace) = 0;

  // Every exit seen so far, in order of time; the workers' pids, by local rank.
  virtual const std::vector<WorkerExit>& exits() const = 0;
  virtual std::vector<pid_t> pids() const = 0;
};

class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;

  // Starts one worker per spec (log dirs already prepared). Throws IoError naming argv[0] when a
  // worker cannot be started.
  virtual std::unique_ptr<AttemptWorkers> launch(const std::vector<WorkerSpec>& specs,
                                                 const OutputOptions& output) = 0;

  // Starts, without waiting for it, what launching workers like `first` needs ahead of time
  // (ProcessLauncher: the forkserver's template, whose imports then overlap the rendezvous).
  // Never throws: a failure is reported by the launch() that needs it.
  virtual void prepare(const WorkerSpec& first) { (void)first; }

  // Completes when launch() will not block on what prepare() started (the template's imports),
  // while the caller's loop runs. Never throws; cancellable.
  virtual boost::asio::awaitable<void> until_prepared() { co_return; }
};

}  // namespace ddp::agent
