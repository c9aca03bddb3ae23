// WorkerGroup: ties the spawner, the child watch, the output routers, the OOM counter and the
// orphan guard into one attempt's workers. Everything runs on the agent's io_context thread;
// a steady_timer that never expires serves as the condition variable waiters sleep on.

#include "agent/process/worker_group.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "agent/core/signal_names.hpp"
#include "agent/process/child_watch.hpp"
#include "agent/process/forkserver.hpp"
#include "agent/process/oom_watch.hpp"
#include "agent/process/orphan_guard.hpp"
#include "agent/process/output_router.hpp"
#include "agent/process/process_spawner.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {

namespace asio = boost::asio;

namespace {

constexpr size_t kReadBufferBytes = 64 * 1024;

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;  // also its process group
  std::string error_file;
  std::shared_ptr<OutputRouter> out;
  std::shared_ptr<OutputRouter> err;
  bool exited = false;
  bool signalled = false;  // the agent sent it a signal (stop, signal_all)
  int sent_signal = 0;     // the last one
};

std::string_view role_of(const WorkerSpec& spec) {
  const auto it = spec.ddprun_env.find("ROLE_NAME");
  return it == spec.ddprun_env.end() ? std::string_view("default") : std::string_view(it->second);
}

}  // namespace

struct WorkerGroup::Impl {
  asio::io_context& io;
  OutputOptions options;
  std::vector<char> buffer = std::vector<char>(kReadBufferBytes);
  std::vector<Worker> workers;
  std::vector<WorkerExit> exits;
  OomWatch oom;
  std::shared_ptr<FilteredLog> filtered_out;  // --duplicate_stdout_filters, shared by the routers
  std::shared_ptr<FilteredLog> filtered_err;
  asio::steady_timer changed;      // cancelled whenever an exit is recorded
  asio::steady_timer grace_timer;  // stop(): SIGKILL when it fires
  bool stop_started = false;
  bool stop_finished = false;
  ForkServer* forkserver = nullptr;  // start()'s, not owned; replace() forks from it too
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);  // weakly held by timer handlers
  ChildWatch watch;  // last: its handler uses the members above

  Impl(asio::io_context& io_context, OutputOptions output)
      : io(io_context),
        options(std::move(output)),
        changed(io_context, asio::steady_timer::time_point::max()),
        grace_timer(io_context),
        watch(io_context, [this](const ChildStatus& s) { on_exit(s); }) {}

  // The prefixes of one stream's lines: {console (--label's, then the tee prefix), tee prefix}.
  // The pid is the worker's, for ${pid} in --log_line_prefix_template.
  std::pair<std::string, std::string> prefixes_for(const WorkerSpec& spec, int stream,
                                                   pid_t pid) const {
    std::string console;
    std::string tee;
    if (options.label) console = fmt::format("[{}:{}]: ", options.host, spec.rank);
    if ((spec.tee_mask & stream) != 0) {
      tee = tee_line_prefix(options.log_line_prefix_template, role_of(spec), spec.rank,
                            spec.local_rank, options.host, pid);
    }
    return {console + tee, tee};
  }

  OutputRoute route_for(const WorkerSpec& spec, int stream) const {
    const bool redirected = (spec.redirect_mask & stream) != 0;
    const bool teed = (spec.tee_mask & stream) != 0;
    OutputRoute route;
    if (spec.console_visible && (!redirected || teed)) {
      route.console_fd = stream == kStdOut ? options.stdout_fd : options.stderr_fd;
    }
    // As torchrun: the filtered copy follows the tee that reaches the console.
    if (teed && spec.console_visible) {
      route.filtered = stream == kStdOut ? filtered_out : filtered_err;
    }
    if (redirected) route.file_path = stream == kStdOut ? spec.stdout_path : spec.stderr_path;
    route.keep_tail = stream == kStdErr;
    return route;
  }

  void open_filtered_logs() {
    if (!options.duplicate_stdout_filters.empty()) {
      filtered_out = std::make_shared<FilteredLog>(options.attempt_dir + "/filtered_stdout.log",
                                                   options.duplicate_stdout_filters);
    }
    if (!options.duplicate_stderr_filters.empty()) {
      filtered_err = std::make_shared<FilteredLog>(options.attempt_dir + "/filtered_stderr.log",
                                                   options.duplicate_stderr_filters);
    }
  }

  void on_exit(const ChildStatus& status) {
    Worker* worker = nullptr;
    for (auto& w : workers) {
      if (w.pid == status.pid) worker = &w;
    }
    if (worker == nullptr || worker->exited) return;
    worker->exited = true;
    // A dead process has nothing in flight: what it wrote is in the pipe now. Read it before the
    // exit is reported, so the stderr tail is complete and output precedes any report.
    worker->out->drain_and_flush();
    worker->err->drain_and_flush();
    WorkerExit& e = exits.emplace_back();
    e.local_rank = worker->local_rank;
    e.rank = worker->rank;
    e.pid = worker->pid;
    e.exit_code = status.exit_code;
    e.signal = status.signal;
    e.wall_time = std::chrono::system_clock::now();
    e.mono_time = std::chrono::steady_clock::now();
    e.stopped_by_agent = worker->signalled;
    e.agent_signal = worker->sent_signal;
    e.oom_suspected = status.signal == SIGKILL && oom.rose_since_mark();
    e.stderr_tail = worker->err->tail_lines();
    e.error_file = worker->error_file;
    if (status.signal != 0) {
      log::get("agent")->debug("worker exited local_rank={} pid={} signal={}", e.local_rank, e.pid,
                               signal_name(status.signal));
    } else {
      log::get("agent")->debug("worker exited local_rank={} pid={} exit_code={}", e.local_rank,
                               e.pid, e.exit_code);
    }
    changed.cancel();
  }

  bool any_running() const {
    for (const auto& w : workers) {
      if (!w.exited) return true;
    }
    return false;
  }

  void signal_running(int signal) {
    for (auto& w : workers) {
      if (w.exited) continue;
      w.signalled = true;
      w.sent_signal = signal;
      signal_process_group(w.pid, signal);
    }
  }

  // SIGKILL to every group, exited leaders' too: their children may live on in the group.
  void kill_all_groups() {
    for (auto& w : workers) {
      if (!w.exited) {
        w.signalled = true;
        w.sent_signal = SIGKILL;
      }
      signal_process_group(w.pid, SIGKILL);
    }
  }

  // Sleeps until the next recorded exit. Throws operation_aborted when the caller's operation is
  // cancelled (the wake-up itself is a timer cancel, so the cancellation state tells them apart).
  asio::awaitable<void> wait_changed() {
    co_await changed.async_wait(asio::as_tuple(asio::use_awaitable));
    const auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) {
      throw boost::system::system_error(asio::error::operation_aborted);
    }
  }

  // A worker's record and output routers, before its process exists.
  Worker make_worker(const WorkerSpec& spec) {
    Worker w;
    w.local_rank = spec.local_rank;
    w.rank = spec.rank;
    w.error_file = spec.error_file;
    w.out = std::make_shared<OutputRouter>(io, route_for(spec, kStdOut), buffer);
    w.err = std::make_shared<OutputRouter>(io, route_for(spec, kStdErr), buffer);
    return w;
  }

  // Takes a started worker (w.pid set, its pipe ends passed on) into the watch and the group;
  // its lines' prefixes are set now that its pid is known (${pid}).
  void adopt(Worker&& w, const WorkerSpec& spec) {
    auto [out_console, out_tee] = prefixes_for(spec, kStdOut, w.pid);
    auto [err_console, err_tee] = prefixes_for(spec, kStdErr, w.pid);
    w.out->set_prefixes(std::move(out_console), std::move(out_tee));
    w.err->set_prefixes(std::move(err_console), std::move(err_tee));
    w.out->close_child_end();
    w.err->close_child_end();
    watch.watch(w.pid);
    w.out->start();
    w.err->start();
    workers.push_back(std::move(w));
  }

  // start() through the forkserver. Every request goes out before any pid is awaited, so the
  // template forks while the agent waits; each worker is guarded and watched before it is
  // released to run its first line, as an exec'd worker is before exec. A failed start kills
  // the released ones; the unreleased see their go pipe close and exit.
  void start_forked(const std::vector<WorkerSpec>& specs, ForkServer& forkserver) {
    std::vector<Worker> pending;
    std::vector<UniqueFd> go;
    try {
      for (const WorkerSpec& spec : specs) {
        Worker& w = pending.emplace_back(make_worker(spec));
        go.push_back(forkserver.request(spec.local_rank, spec, w.out->child_end(),
                                        w.err->child_end()));
      }
      for (size_t i = 0; i < pending.size(); ++i) {
        Worker& w = pending[i];
        w.pid = forkserver.await_pid(w.local_rank);
        OrphanGuard::instance().add(w.pid);
        adopt(std::move(w), specs[i]);
        ForkServer::release(go[i]);  // it runs while the template forks the next one
      }
    } catch (...) {
      kill_and_reap_now();
      throw;
    }
    log::get("agent")->debug("forked {} workers from the forkserver through_middle={}",
                             specs.size(), forkserver.through_middle());
  }

  // Spawns every spec with clone + exec and adds it to the group. A failure kills the group.
  void start_exec(const std::vector<WorkerSpec>& specs);

  // Kills and reaps what is still running: the destructor and a failed start().
  void kill_and_reap_now() {
    kill_all_groups();
    for (auto& w : workers) {
      if (!w.exited && w.pid > 0) reap_process(w.pid, true);
      w.exited = true;
    }
    watch.sweep();  // orphans adopted into the groups
  }

  ~Impl() {
    kill_and_reap_now();
    for (auto& w : workers) OrphanGuard::instance().remove(w.pid);
  }
};

void WorkerGroup::Impl::start_exec(const std::vector<WorkerSpec>& specs) {
  // Resolve every program first: a missing one fails the start before anything runs.
  std::vector<ExecImage> images;
  std::vector<CpuPlacement> placements;  // built before any child starts (no allocation there)
  images.reserve(specs.size());
  for (const auto& spec : specs) {
    images.emplace_back(spec.argv, spec.env);
    placements.push_back(spec.numa.cpus.empty()
                             ? CpuPlacement{}
                             : CpuPlacement::of(spec.numa.cpus, spec.numa.memory_node));
  }

  OrphanGuard& guard = OrphanGuard::instance();
  std::vector<std::unique_ptr<ForkedChild>> children;
  children.reserve(specs.size());
  workers.reserve(workers.size() + specs.size());
  try {
    for (size_t i = 0; i < specs.size(); ++i) {
      const WorkerSpec& spec = specs[i];
      Worker w = make_worker(spec);
      // The child registers its group with the guard itself, before exec (see add_self).
      const CpuPlacement* placement = placements[i].cpu_mask.empty() ? nullptr : &placements[i];
      const ChildSetup setup{.stdout_fd = w.out->child_end(),
                             .stderr_fd = w.err->child_end(),
                             .guard_socket = guard.socket(),
                             .placement = placement};
      auto child = std::make_unique<ForkedChild>(images[i], setup);
      w.pid = child->pid();
      adopt(std::move(w), spec);
      children.push_back(std::move(child));
    }
  } catch (...) {
    kill_and_reap_now();
    throw;
  }
  // Every child is forked before any exec is awaited: the execs overlap.
  std::string failure;
  for (size_t i = 0; i < children.size(); ++i) {
    const int error = children[i]->await_exec();
    if (error != 0 && failure.empty()) {
      failure = fmt::format("cannot start worker local_rank={}: exec {}: {}", specs[i].local_rank,
                            images[i].program(), std::strerror(error));
    }
  }
  if (!failure.empty()) {
    kill_and_reap_now();
    throw IoError(failure);
  }
  log::get("agent")->debug("started {} workers", specs.size());
}

WorkerGroup::WorkerGroup(asio::io_context& io, OutputOptions options)
    : impl_(std::make_unique<Impl>(io, std::move(options))) {}

WorkerGroup::~WorkerGroup() = default;

void WorkerGroup::start(const std::vector<WorkerSpec>& specs, ForkServer* forkserver) {
  Impl& g = *impl_;
  DDP_CHECK(g.workers.empty(), "WorkerGroup::start called twice");
  g.open_filtered_logs();
  g.oom.mark();
  g.forkserver = forkserver;
  if (forkserver != nullptr) {
    g.start_forked(specs, *forkserver);
  } else {
    g.start_exec(specs);
  }
}

pid_t WorkerGroup::replace(const WorkerSpec& spec) {
  Impl& g = *impl_;
  DDP_CHECK(!g.stop_started, "WorkerGroup::replace after stop");
  size_t slot = 0;
  while (slot < g.workers.size() && g.workers[slot].local_rank != spec.local_rank) ++slot;
  DDP_CHECK(slot < g.workers.size() && g.workers[slot].exited,
            "WorkerGroup::replace: local_rank {} has no exited worker", spec.local_rank);
  const pid_t old_pid = g.workers[slot].pid;
  signal_process_group(old_pid, SIGKILL);  // what it left behind in its group
  OrphanGuard::instance().remove(old_pid);
  for (auto& e : g.exits) {
    if (e.pid == old_pid) e.replaced = true;
  }
  if (g.forkserver != nullptr && !g.forkserver->is_alive()) {
    log::get("agent")->warn("forkserver: the template exited; starting local_rank {} with exec",
                            spec.local_rank);
    g.forkserver = nullptr;
  }
  if (g.forkserver != nullptr) {
    g.start_forked({spec}, *g.forkserver);
  } else {
    g.start_exec({spec});
  }
  // The new worker was added last; it takes the old one's place, so pids() stays by local rank.
  g.workers[slot] = std::move(g.workers.back());
  g.workers.pop_back();
  log::get("agent")->debug("replaced worker local_rank={} pid {} by pid {}", spec.local_rank,
                           old_pid, g.workers[slot].pid);
  return g.workers[slot].pid;
}

asio::awaitable<std::optional<WorkerExit>> WorkerGroup::wait_first_failure() {
  Impl& g = *impl_;
  while (true) {
    for (const auto& e : g.exits) {
      if (e.failed() && !e.replaced) co_return e;
    }
    if (!g.any_running()) co_return std::nullopt;
    co_await g.wait_changed();
  }
}

void WorkerGroup::signal_all(int signal) { impl_->signal_running(signal); }

asio::awaitable<void> WorkerGroup::stop_worker(int local_rank, int signal,
                                               std::chrono::milliseconds grace) {
  Impl& g = *impl_;
  // Found again after every wait: a vector of workers may move while this one waits.
  const auto running = [&g, local_rank]() -> Worker* {
    for (auto& w : g.workers) {
      if (w.local_rank == local_rank && !w.exited) return &w;
    }
    return nullptr;
  };
  Worker* worker = running();
  if (worker == nullptr) co_return;
  const pid_t pid = worker->pid;
  worker->signalled = true;
  worker->sent_signal = signal;
  signal_process_group(pid, SIGCONT);
  signal_process_group(pid, signal);
  asio::steady_timer kill_timer(g.io, grace);
  kill_timer.async_wait([&running, pid](boost::system::error_code ec) {
    if (ec) return;  // it exited first, or the wait was cancelled
    if (Worker* w = running(); w != nullptr && w->pid == pid) {
      log::get("agent")->debug("grace period over: killing local_rank {}'s process group",
                               w->local_rank);
      w->sent_signal = SIGKILL;
      signal_process_group(pid, SIGKILL);
    }
  });
  while (running() != nullptr && running()->pid == pid) co_await g.wait_changed();
  kill_timer.cancel();
  signal_process_group(pid, SIGKILL);  // what it left in its group
}

asio::awaitable<std::vector<WorkerExit>> WorkerGroup::stop(int signal,
                                                           std::chrono::milliseconds grace) {
  Impl& g = *impl_;
  if (!g.stop_started) {
    g.stop_started = true;
    g.signal_running(signal);
    if (g.any_running()) {
      g.grace_timer.expires_after(grace);
      g.grace_timer.async_wait([&g, alive = std::weak_ptr<bool>(g.alive)](
                                   boost::system::error_code ec) {
        if (ec || alive.expired()) return;
        log::get("agent")->debug("grace period over: killing the workers' process groups");
        g.kill_all_groups();
      });
    }
  }
  while (g.any_running()) co_await g.wait_changed();
  if (!g.stop_finished) {
    g.stop_finished = true;
    g.grace_timer.cancel();
    g.kill_all_groups();  // grandchildren left in the groups
    g.watch.sweep();
    for (auto& w : g.workers) {
      w.out->drain_and_flush();
      w.err->drain_and_flush();
    }
  }
  co_return g.exits;
}

const std::vector<WorkerExit>& WorkerGroup::exits() const { return impl_->exits; }

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> out;
  out.reserve(impl_->workers.size());
  for (const auto& w : impl_->workers) out.push_back(w.pid);
  return out;
}

bool WorkerGroup::running() const { return impl_->any_running(); }

ProcessLauncher::~ProcessLauncher() = default;

void ProcessLauncher::start_template(const WorkerSpec& first) {
  if (forkserver_ && forkserver_->is_ready() && !forkserver_->is_alive()) {
    log::get("agent")->warn("forkserver: the template exited; starting it again");
    forkserver_.reset();
  }
  if (!forkserver_) {
    forkserver_ = std::make_unique<ForkServer>(*forkserver_options_, template_env(first));
  }
}

void ProcessLauncher::prepare(const WorkerSpec& first) {
  if (forkserver_options_ && runs_in_template(*forkserver_options_, first.argv)) {
    start_template(first);
  }
}

asio::awaitable<void> ProcessLauncher::until_prepared() {
  if (forkserver_) co_await forkserver_->until_ready();
}

ForkServer* ProcessLauncher::forkserver_for(const std::vector<WorkerSpec>& specs) {
  if (!forkserver_options_ || specs.empty()) return nullptr;
  for (const WorkerSpec& spec : specs) {
    if (!runs_in_template(*forkserver_options_, spec.argv)) return nullptr;
  }
  start_template(specs[0]);
  try {
    forkserver_->await_ready();  // at once when until_prepared() waited for it
  } catch (const IoError& e) {
    forkserver_.reset();
    if (!forkserver_options_->fallback) throw;
    log::get("agent")->warn("{}; starting workers with exec instead ({})", e.what(),
                            forkserver_options_->by_default
                                ? "the forkserver is --recovery=inprocess's default; "
                                  "--start_method=spawn execs without trying it"
                                : "--preload_fallback");
    forkserver_options_.reset();
    return nullptr;
  }
  return forkserver_.get();
}

std::unique_ptr<AttemptWorkers> ProcessLauncher::launch(const std::vector<WorkerSpec>& specs,
                                                        const OutputOptions& output) {
  ForkServer* forkserver = forkserver_for(specs);
  auto group = std::make_unique<WorkerGroup>(io_, output);
  group->start(specs, forkserver);
  return group;
}

void become_child_subreaper() {
  make_child_subreaper();
  // A console reader that goes away (ddprun ... | head) must not kill the supervisor: console
  // writes then fail with EPIPE and that stream stops. Workers get SIGPIPE back at exec.
  std::signal(SIGPIPE, SIG_IGN);
  OrphanGuard::instance();  // fork the watchdog now, while the agent is small
}

}  // namespace ddp::agent
