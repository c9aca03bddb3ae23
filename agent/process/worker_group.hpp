#pragma once
// WorkerGroup: the processes of one attempt on this node. Spawns them (vfork-style clone + exec,
// own process group each, parent-death signal), routes their output line by line (console, tee,
// redirect files), keeps the last lines of every worker's stderr, and learns of exits on the
// io_context (pidfd or SIGCHLD; never a polling sleep). If the agent dies, even by SIGKILL, every
// worker and grandchild dies within a second.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/worker_launcher.hpp"
#include "agent/core/worker_spec.hpp"
#include "agent/process/forkserver.hpp"

namespace ddp::agent {

class WorkerGroup final : public AttemptWorkers {
 public:
  WorkerGroup(boost::asio::io_context& io, OutputOptions options);
  ~WorkerGroup() override;  // kills (SIGKILL) whatever still runs
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Spawns every spec (log dirs already prepared). Throws IoError naming argv[0] when exec fails
  // (reported through a CLOEXEC pipe, so a missing program is an error, not exit 127). With a
  // `forkserver` (not owned), every spec is forked from its template instead (the caller checked
  // ForkServer::runs); such workers are watched, signalled and reaped the same way.
  void start(const std::vector<WorkerSpec>& specs, ForkServer* forkserver = nullptr);

  // Completes when the first worker fails (returns that exit) or when every worker has exited
  // successfully (returns nullopt). Cancellable (per-operation cancellation).
  boost::asio::awaitable<std::optional<WorkerExit>> wait_first_failure() override;

  // Starts `spec` (exec, or from the forkserver start() had while it lives) in the place of its
  // local rank's exited worker; SIGKILLs what that worker left in its process group first.
  pid_t replace(const WorkerSpec& spec) override;

  // Sends `signal` to every running worker's process group.
  void signal_all(int signal) override;

  // SIGCONT and `signal` to that worker's process group, SIGKILL to the group after `grace` (and
  // once it exited, for what it left there); waits for its exit. Cancellable.
  boost::asio::awaitable<void> stop_worker(int local_rank, int signal,
                                           std::chrono::milliseconds grace) override;

  // Sends `signal` to every running worker's process group, waits up to `grace` for them to
  // exit, then SIGKILLs the process groups, waits for every exit and drains their output.
  // Returns every worker's exit, in order of time. Idempotent.
  boost::asio::awaitable<std::vector<WorkerExit>> stop(int signal,
                                                       std::chrono::milliseconds grace) override;

  // Every exit seen so far, in order of time.
  const std::vector<WorkerExit>& exits() const override;
  std::vector<pid_t> pids() const override;
  bool running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The real launcher: a WorkerGroup per attempt, started at once. With forkserver options
// (forkserver.hpp) Python workers fork from one template, started by prepare() (the agent calls
// it before its first rendezvous, so the imports overlap it) or else by the first launch, and
// kept for every later one (started again if it died); until_prepared() waits for its imports
// on the loop. When it cannot start, launch() throws its IoError, or with `fallback` logs a
// warning and execs from then on.
class ProcessLauncher final : public WorkerLauncher {
 public:
  explicit ProcessLauncher(boost::asio::io_context& io,
                           std::optional<ForkServerOptions> forkserver = std::nullopt)
      : io_(io), forkserver_options_(std::move(forkserver)) {}
  ~ProcessLauncher() override;
  std::unique_ptr<AttemptWorkers> launch(const std::vector<WorkerSpec>& specs,
                                         const OutputOptions& output) override;
  void prepare(const WorkerSpec& first) override;
  boost::asio::awaitable<void> until_prepared() override;

 private:
  ForkServer* forkserver_for(const std::vector<WorkerSpec>& specs);
  void start_template(const WorkerSpec& first);

  boost::asio::io_context& io_;
  std::optional<ForkServerOptions> forkserver_options_;  // nullopt: exec
  std::unique_ptr<ForkServer> forkserver_;
};

// Makes this process a child subreaper (grandchildren whose parent dies are reparented to us and
// reaped), starts the orphan guard's watchdog, and ignores SIGPIPE (a closed console must not
// kill the agent). Call once from main before any worker starts. Throws IoError if the kernel
// refuses the subreaper attribute.
void become_child_subreaper();

}  // namespace ddp::agent
