// The agent loop. Every wait that can end for more than one reason is a race under Asio's `||`
// (the losers are cancelled); store waits that cannot be cancelled run under abandonable(), so a
// signal always takes effect at once.

#include "agent/elastic/elastic_agent.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "agent/cli/log_dirs.hpp"
#include "agent/core/round_events.hpp"
#include "agent/core/signal_names.hpp"
#include "agent/elastic/failure_report.hpp"
#include "agent/elastic/inprocess_recovery.hpp"
#include "agent/process/python_package.hpp"
#include "agent/process/reform_channel.hpp"
#include "agent/process/worker_group.hpp"
#include "agent/stacks/hang_detector.hpp"
#include "agent/stacks/stack_hook.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "rendezvous/abandonable.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using asio::use_awaitable;

// Asio's `||` waits for the first operation that *succeeds*: an exception in one branch would
// wait for the others. Branches that may throw therefore return their exception as a value.
template <typename T>
struct Caught {
  std::optional<T> value;
  std::exception_ptr error;
  T get() && {
    if (error) std::rethrow_exception(error);
    return std::move(*value);
  }
};

template <typename T>
asio::awaitable<Caught<T>> caught(asio::awaitable<T> op) {
  Caught<T> result;
  try {
    result.value.emplace(co_await std::move(op));
  } catch (...) {
    result.error = std::current_exception();
  }
  co_return result;
}

std::string describe(const WorkerExit& exit) {
  return exit.signal != 0 ? fmt::format("rank {} (local_rank {}, pid {}) killed by {}", exit.rank,
                                        exit.local_rank, exit.pid, signal_name(exit.signal))
                          : fmt::format("rank {} (local_rank {}, pid {}) exited with {}", exit.rank,
                                        exit.local_rank, exit.pid, exit.exit_code);
}

Event exit_event(const WorkerExit& exit) {
  Event event("worker_exited");
  event.wall_time = exit.wall_time;
  event.mono_time = exit.mono_time;
  event.with("rank", exit.rank).with("local_rank", exit.local_rank).with("pid", exit.pid);
  if (exit.signal != 0) {
    event.with("signal", signal_name(exit.signal));
  } else {
    event.with("exit_code", exit.exit_code);
  }
  event.with("stopped_by_agent", exit.stopped_by_agent ? 1 : 0);
  if (exit.oom_suspected) event.with("oom_suspected", 1);
  return event;
}

// Emits worker_exited for the exits of `group` not emitted yet.
void emit_exits(EventSink& events, const AttemptWorkers& group, std::size_t& emitted) {
  const auto& exits = group.exits();
  for (; emitted < exits.size(); ++emitted) events.emit(exit_event(exits[emitted]));
}

void emit_stopped(EventSink& events, const AttemptWorkers& group, std::size_t& emitted,
                  const std::string& reason) {
  emit_exits(events, group, emitted);
  events.emit(Event("workers_stopped")
                  .with("reason", reason)
                  .with("count", static_cast<std::int64_t>(group.exits().size())));
}

void emit_finish(EventSink& events, int exit_code, const std::string& reason) {
  events.emit(Event("finish").with("exit_code", exit_code).with("reason", reason));
}

std::set<int> handled_signals(const AgentSpec& spec) {
  std::set<int> signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  signals.insert(spec.signals_to_handle.begin(), spec.signals_to_handle.end());
  signals.erase(SIGQUIT);  // stack reports (StackService), never a stop
  return signals;
}

// What the hang detector and the stack service watch: each worker, its pid and its files.
std::vector<HangTarget> make_hang_targets(const std::vector<WorkerSpec>& specs,
                                          const std::vector<pid_t>& pids) {
  std::vector<HangTarget> targets;
  for (std::size_t i = 0; i < specs.size() && i < pids.size(); ++i) {
    HangTarget target;
    target.worker = {specs[i].rank, specs[i].local_rank, pids[i], specs[i].log_dir};
    target.progress_file = specs[i].ddprun_env.at(kProgressFileEnv);
    targets.push_back(std::move(target));
  }
  return targets;
}

// Multi-node jobs with --hang_timeout: the detectors share long waits through the job's store.
std::shared_ptr<HangPeers> hang_peers(const AgentSpec& spec, const rdzv::RendezvousInfo& info,
                                      const std::string& addr, std::uint16_t port) {
  if (info.group_world_size <= 1 || spec.hang_timeout.count() <= 0 || port == 0) return nullptr;
  return make_store_hang_peers(addr, port, info.run_id, info.round);
}

// The failure a hang counts as: the first hung rank's exit, which the agent caused but which is
// the root cause all the same. Found by local rank: a kept worker's rank may have changed since
// its start (--recovery=inprocess), and its exit carries the rank it started with.
WorkerExit hung_exit(const std::vector<WorkerExit>& exits, const HangVerdict& verdict,
                     const std::vector<WorkerSpec>& specs) {
  for (const WorkerSpec& spec : specs) {
    if (spec.rank != verdict.lagging.front()) continue;
    for (const auto& exit : exits) {
      if (exit.local_rank == spec.local_rank && !exit.replaced) {
        WorkerExit hung = exit;
        hung.rank = spec.rank;
        hung.stopped_by_agent = false;
        return hung;
      }
    }
  }
  WorkerExit hung;
  hung.rank = verdict.lagging.front();
  hung.exit_code = 1;
  hung.wall_time = std::chrono::system_clock::now();
  hung.mono_time = std::chrono::steady_clock::now();
  return hung;
}

// The local ranks of the group's failed workers that replace() may start again: every failed,
// not yet replaced one, while some worker still runs; empty when none runs any more.
std::set<int> replaceable_ranks(const AttemptWorkers& group) {
  std::set<int> failed;
  std::set<int> exited;
  for (const WorkerExit& exit : group.exits()) {
    if (exit.replaced) continue;
    exited.insert(exit.local_rank);
    if (exit.failed()) failed.insert(exit.local_rank);
  }
  if (exited.size() >= group.pids().size()) return {};
  return failed;
}

// How many of the group's workers still run.
std::size_t running_count(const AttemptWorkers& group) {
  std::size_t exited = 0;
  for (const WorkerExit& exit : group.exits()) {
    if (!exit.replaced) ++exited;
  }
  return group.pids().size() - exited;
}

// The local ranks of this node's `ranks` (a hang verdict names only this node's ranks).
std::set<int> local_ranks_of(const std::vector<int>& ranks, const std::vector<WorkerSpec>& specs) {
  std::set<int> local;
  for (const WorkerSpec& spec : specs) {
    if (std::find(ranks.begin(), ranks.end(), spec.rank) != ranks.end()) {
      local.insert(spec.local_rank);
    }
  }
  return local;
}

}  // namespace

std::string local_host_name() {
  // Set by a --hostfile launcher: the name the hostfile gave this node.
  if (const char* given = std::getenv("DDPRUN_NODE_NAME"); given != nullptr && *given != '\0') {
    return given;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

ElasticAgent::ElasticAgent(asio::io_context& io, AgentSpec spec, rdzv::Rendezvous& rendezvous,
                           EventSink& events, WorkerLauncher& launcher, WorkerHandover* handover)
    : io_(io),
      spec_(std::move(spec)),
      rendezvous_(rendezvous),
      events_(events),
      launcher_(launcher),
      handover_(handover),
      signals_(io),
      host_(local_host_name()),
      stacks_(io, events, host_) {
  DDP_CHECK(spec_.workers != nullptr, "the agent's spec has no worker plan");
  for (int signal : handled_signals(spec_)) signals_.add(signal);
}

ElasticAgent::~ElasticAgent() {
  if (hang_peers_) hang_peers_->close();
}

asio::awaitable<int> ElasticAgent::wait_signal() {
  // Cancelled when another branch of the agent's race wins, which then ignores this branch's
  // value: 0 then, not an operation_aborted exception at the end of every round.
  boost::system::error_code ec;
  const int signal = co_await signals_.async_wait(asio::redirect_error(use_awaitable, ec));
  co_return ec ? 0 : signal;
}

asio::awaitable<int> ElasticAgent::stop_on_signal(AttemptWorkers& group, int signal,
                                                  std::size_t& emitted) {
  log::get("agent")->warn("received {}: forwarding it to every worker, then SIGKILL after {}s",
                          signal_name(signal), spec_.shutdown_timeout.count() / 1000.0);
  co_await group.stop(signal, spec_.shutdown_timeout);
  emit_stopped(events_, group, emitted, "signal");
  emit_finish(events_, 128 + signal, "signal");
  co_return 128 + signal;
}

int ElasticAgent::exit_on_signal(int signal, std::string_view why) {
  if (!why.empty()) log::get("agent")->warn("received {} {}", signal_name(signal), why);
  emit_finish(events_, 128 + signal, "signal");
  return 128 + signal;
}

std::unique_ptr<AttemptWorkers> ElasticAgent::launch_workers(const rdzv::RendezvousInfo& info,
                                                             const std::vector<WorkerSpec>& specs,
                                                             const std::string& attempt_dir) {
  OutputOptions output;
  output.host = host_;
  output.label = spec_.label;
  output.log_line_prefix_template = spec_.log_line_prefix_template;
  output.duplicate_stdout_filters = spec_.duplicate_stdout_filters;
  output.duplicate_stderr_filters = spec_.duplicate_stderr_filters;
  output.attempt_dir = attempt_dir;
  auto group = launcher_.launch(specs, output);
  std::vector<std::int64_t> pids;
  for (pid_t pid : group->pids()) pids.push_back(pid);
  events_.emit(Event("workers_started")
                   .with("restart_count", info.restart_count)
                   .with("rank_base", info.rank_base)
                   .with("pids", pids));
  log::get("agent")->info("workers started restart_count={} ranks={}..{} world_size={}",
                          info.restart_count, info.rank_base,
                          info.rank_base + spec_.nproc_per_node - 1, info.world_size);
  return group;
}

void ElasticAgent::replace_workers(AttemptWorkers& group, const rdzv::RendezvousInfo& info,
                                   const std::vector<WorkerSpec>& specs,
                                   const std::string& attempt_dir, const std::set<int>& dead) {
  for (int local_rank : dead) {
    const WorkerSpec& spec = specs.at(local_rank);
    prepare_worker_log_dir(attempt_dir, local_rank);
    const pid_t pid = group.replace(spec);
    events_.emit(Event("worker_replaced")
                     .with("round", info.round)
                     .with("restart_count", info.restart_count)
                     .with("rank", spec.rank)
                     .with("local_rank", local_rank)
                     .with("pid", pid));
    log::get("agent")->info("worker local_rank={} started again as rank {} (pid {}) in round {}",
                            local_rank, spec.rank, pid, info.round);
  }
}

asio::awaitable<bool> ElasticAgent::finish_success() {
  co_await rendezvous_.finish(true);
  co_return true;
}

asio::awaitable<int> ElasticAgent::run() {
  auto log = log::get("agent");
  const std::string run_dir = create_run_log_dir(spec_.log_dir, spec_.run_id, spec_.parent_env);
  const TemporaryLogDir temporary_log_dir(spec_.log_dir, run_dir);  // gone after `group`
  log->info("log directory {}", run_dir);
  stacks_.start(run_dir);
  write_python_package(python_hook_dir(run_dir));  // `import ddprun` for the workers
  if (!spec_.omp_num_threads_banner.empty() && log->should_log(spdlog::level::warn)) {
    const std::string& banner = spec_.omp_num_threads_banner;  // one block, as torchrun prints it
    std::fwrite(banner.data(), 1, banner.size(), stderr);
  }

  // --recovery=inprocess: the hand-over channel (a test's fake, else a socket in the run dir).
  std::unique_ptr<WorkerHandover> channel;
  std::optional<InprocessRecovery> recovery;
  if (spec_.inprocess_recovery) {
    if (handover_ == nullptr) {
      channel = std::make_unique<ReformChannel>(io_, run_dir + "/reform.sock");
    }
    recovery.emplace(spec_.reform_timeout,
                     handover_ != nullptr ? *handover_ : *channel, events_, run_dir);
  }

  // The forkserver's template starts now: its imports overlap the first rendezvous. Its
  // environment leaves out what a round decides (ranks, sizes), so a spec of no round serves.
  launcher_.prepare(
      spec_.workers->specs(rdzv::RendezvousInfo{}, attempt_log_dir(run_dir, 0)).front());

  std::unique_ptr<AttemptWorkers> group;
  std::vector<WorkerSpec> started;  // what the group's workers were started with
  std::size_t emitted = 0;          // the group's exits already emitted as events
  // --recovery=inprocess: local ranks whose processes failed while their peers stay (started
  // again before the next hand-over), and those started so, until a hand-over succeeds.
  std::set<int> dead;
  std::set<int> newcomers;
  std::set<std::string> started_dirs;  // the attempt folders processes were started in
  for (;;) {
    stacks_.set_workers({});
    auto joined = co_await (
        caught(rdzv::abandonable(rendezvous_.next_round(spec_.nproc_per_node))) || wait_signal());
    if (joined.index() == 1) {
      const int signal = std::get<1>(joined);
      if (recovery && recovery->has_pending()) {  // the kept workers still run
        co_return co_await stop_on_signal(*group, signal, emitted);
      }
      co_return exit_on_signal(signal, "during rendezvous; no workers running");
    }
    const rdzv::RendezvousInfo info = std::get<0>(std::move(joined)).get();
    events_.emit(Event("rendezvous")
                     .with("round", info.round)
                     .with("group_rank", info.group_rank)
                     .with("group_world_size", info.group_world_size)
                     .with("world_size", info.world_size)
                     .with("restart_count", info.restart_count)
                     .with("master_addr", info.master_addr)
                     .with("master_port", static_cast<std::int64_t>(info.master_port)));
    const auto [stack_addr, stack_port] =
        spec_.rendezvous_store.value_or(std::make_pair(info.master_addr, info.master_port));
    stacks_.on_round(info, stack_addr, stack_port);

    // --recovery=inprocess may start processes again at a restart count whose folder holds the
    // logs of processes it started before (a worker replaced after a node loss, the node's
    // workers after a failed re-form): those starts get a folder of their own.
    int start = 0;
    while (recovery && started_dirs.count(attempt_log_dir(run_dir, info.restart_count, start))) {
      ++start;
    }
    const std::string attempt_dir = attempt_log_dir(run_dir, info.restart_count, start);
    auto specs = spec_.workers->specs(info, attempt_dir);
    bool kept = false;  // the live workers took their places in this round
    if (recovery) recovery->prepare(specs);
    if (recovery && recovery->has_pending()) {
      if (!dead.empty()) {
        recovery->publish(info.round, specs);  // what the newcomers read on connecting
        replace_workers(*group, info, specs, attempt_dir, dead);
        started_dirs.insert(attempt_dir);
        for (int local_rank : dead) started.at(local_rank) = specs.at(local_rank);
        newcomers.insert(dead.begin(), dead.end());
        dead.clear();
      }
      // A process started for an earlier round that has not connected yet reads this round's
      // place when it does: it joins as a newcomer rather than being stopped for not re-forming.
      if (const auto waiting = recovery->not_connected(group->pids()); !waiting.empty()) {
        log->info("local ranks {} have not connected yet; they join round {} from their start",
                  fmt::join(waiting, ","), info.round);
        newcomers.insert(waiting.begin(), waiting.end());
      }
      // The round may end again during the hand-over (a second node lost, one the workers now
      // wait for in their init): the kept workers then wait for the next round's places.
      auto handed = co_await (caught(recovery->hand_over(info.round, specs, newcomers)) ||
                              caught(rendezvous_.watch_round()) || wait_signal());
      if (handed.index() == 2) {
        co_return co_await stop_on_signal(*group, std::get<2>(handed), emitted);
      }
      if (handed.index() == 1) {
        const auto event = std::get<1>(std::move(handed)).get();
        log->warn("round {} ended during the hand-over: {}; the kept workers wait for the next",
                  info.round, event.detail);
        recovery->keep_workers(event);
        continue;
      }
      kept = std::get<0>(std::move(handed)).get();
      newcomers.clear();
      if (kept) keep_started_files(specs, started);
      if (!kept) {
        group->signal_all(SIGCONT);  // a stopped worker must run to take SIGTERM
        co_await group->stop(SIGTERM, spec_.shutdown_timeout);
        emit_stopped(events_, *group, emitted, "reform_failed");
      }
    }
    if (!kept) {
      // The template's imports (or its start again, if it died) end here, on the loop: a store
      // this agent hosts answers and signals are served meanwhile.
      launcher_.prepare(specs.front());
      auto prepared = co_await (launcher_.until_prepared() || wait_signal());
      if (prepared.index() == 1) {
        co_return exit_on_signal(std::get<1>(prepared),
                                 "while the workers' start was prepared; no workers running");
      }
      prepare_attempt_log_dir(attempt_dir, spec_.nproc_per_node);
      if (recovery) recovery->publish(info.round, specs);
      group.reset();  // the previous attempt's processes are all gone by now
      group = launch_workers(info, specs, attempt_dir);
      started_dirs.insert(attempt_dir);
      started = specs;
      emitted = 0;
    }
    const auto hang_targets = make_hang_targets(specs, group->pids());
    if (hang_peers_) hang_peers_->close();
    hang_peers_ = hang_peers(spec_, info, stack_addr, stack_port);
    std::vector<StackTarget> stack_targets;
    for (const auto& target : hang_targets) stack_targets.push_back(target.worker);
    stacks_.set_workers(stack_targets);

    auto outcome = co_await (caught(group->wait_first_failure()) ||
                             caught(rendezvous_.watch_round()) || wait_signal() ||
                             caught(watch_for_hang(hang_targets, spec_.hang_timeout,
                                                   hang_peers_, info.group_rank)));

    if (outcome.index() == 2) {  // a handled signal: forward it, grace, kill, exit 128+N
      co_return co_await stop_on_signal(*group, std::get<2>(outcome), emitted);
    }

    if (outcome.index() == 1) {  // another node: restart with it, no restart spent
      const auto event = std::get<1>(std::move(outcome)).get();
      if (recovery) {  // or keep the workers and hand them the next round
        log->warn("round ended by another node: {}; keeping the workers for an in-process re-form",
                  event.detail);
        recovery->keep_workers(event);
        continue;
      }
      log->warn(
          "round ended by another node: {}; stopping workers, then joining the next round if the "
          "job goes on",
          event.detail);
      co_await group->stop(SIGTERM, spec_.shutdown_timeout);
      emit_stopped(events_, *group, emitted, "round_change");
      emit_round_change(events_, event);
      continue;
    }

    std::optional<WorkerExit> failure;
    std::string reason;  // what the failure is reported as (restart event, other nodes)
    // --recovery=inprocess: the local ranks started again alone in the next round (failed or
    // hung) while their peers stay; empty when the node's workers start again together.
    std::set<int> failed_ranks;
    if (outcome.index() == 3) {  // a hang: report it, then fail the attempt as the hung rank
      const HangVerdict verdict = std::get<3>(std::move(outcome)).get();
      log->error("{}; stopping the workers", verdict.summary);
      const auto detected = std::chrono::steady_clock::now();
      co_await stacks_.report("hang", verdict.lines, true);
      const auto report_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - detected);
      events_.emit(Event("hang")
                       .with("summary", verdict.summary)
                       .with("ranks", std::vector<std::int64_t>(verdict.lagging.begin(),
                                                                 verdict.lagging.end()))
                       .with("idle_ms", std::llround(verdict.idle_s * 1000))
                       .with("report_ms", static_cast<std::int64_t>(report_ms.count())));
      const std::set<int> hung = local_ranks_of(verdict.lagging, specs);
      if (recovery && !hung.empty() && hung.size() < running_count(*group)) {  // only they stop
        for (int local_rank : hung) {
          co_await group->stop_worker(local_rank, SIGTERM, spec_.shutdown_timeout);
        }
        failure = hung_exit(group->exits(), verdict, specs);
        emit_exits(events_, *group, emitted);
        failed_ranks = hung;
        log->error("stopped the hung local ranks {}; their peers keep running "
                   "(--recovery=inprocess)", fmt::join(hung, ","));
      } else {
        group->signal_all(SIGCONT);  // a stopped worker must run to take SIGTERM
        failure = hung_exit(co_await group->stop(SIGTERM, spec_.shutdown_timeout), verdict,
                            specs);
        emit_stopped(events_, *group, emitted, "hang");
      }
      reason = fmt::format("{} ({})", verdict.summary, host_);
    } else {
      failure = std::get<0>(std::move(outcome)).get();
    }
    if (!failure) {  // every worker exited 0: the exit barrier, unless another node fails now
      emit_exits(events_, *group, emitted);
      auto done = co_await (caught(rdzv::abandonable(finish_success())) ||
                            caught(rendezvous_.watch_round()) || wait_signal());
      if (done.index() == 0) {
        std::get<0>(std::move(done)).get();
        log->info("workers succeeded");
        emit_finish(events_, 0, "succeeded");
        co_return 0;
      }
      if (done.index() == 2) {
        co_return exit_on_signal(std::get<2>(done), "");
      }
      const auto event = std::get<1>(std::move(done)).get();
      log->warn("workers succeeded but another node failed: {}; restarting", event.detail);
      emit_round_change(events_, event);
      continue;
    }

    // --recovery=inprocess: the failed workers start again in the next round and their live
    // peers stay, unless none is left (then the whole node starts again the ordinary way).
    if (recovery && outcome.index() != 3) failed_ranks = replaceable_ranks(*group);
    const bool replacing = !failed_ranks.empty();
    if (outcome.index() != 3) {
      reason = describe(*failure);
      if (replacing) {
        log->error("worker failed {}; its peers keep running (--recovery=inprocess)", reason);
        emit_exits(events_, *group, emitted);
      } else {
        log->error("worker failed {}; stopping the other workers", reason);
        co_await group->stop(SIGTERM, spec_.shutdown_timeout);
        emit_stopped(events_, *group, emitted, "failure");
      }
    }
    // Workers fail when a peer node dies (their collectives break): that is the loss, which
    // spends no restart. The rendezvous tells within its grace whether a node was lost, or
    // whether another node failed first (and spent the restart). A signal ends the wait (the
    // workers are stopped already).
    auto verdict =
        co_await (caught(rdzv::abandonable(rendezvous_.failure_verdict(failure->mono_time))) ||
                  wait_signal());
    if (verdict.index() == 1 && replacing) {
      co_return co_await stop_on_signal(*group, std::get<1>(verdict), emitted);
    }
    if (verdict.index() == 1) {
      co_return exit_on_signal(std::get<1>(verdict),
                               "while waiting for the failure verdict; the workers are stopped");
    }
    if (const auto cause = std::get<0>(std::move(verdict)).get()) {
      log->warn("the failure follows from another node ({}); re-forming without spending a "
                "restart", cause->detail);
      if (replacing) {
        recovery->keep_workers(*cause);
        dead = failed_ranks;
        continue;
      }
      emit_round_change(events_, *cause);
      continue;
    }
    const int restart_count = co_await rendezvous_.report_failure(reason);
    if (restart_count <= spec_.max_restarts) {
      log->warn("restarting workers restart_count={} max_restarts={}", restart_count,
                spec_.max_restarts);
      events_.emit(Event("restart")
                       .with("reason", reason)
                       .with("restart_spent", 1)
                       .with("restart_count", restart_count));
      if (replacing) {
        recovery->keep_workers_after_failure(reason);
        dead = failed_ranks;
      }
      continue;
    }
    if (replacing) {  // no restart left: the live peers stop before the report
      co_await group->stop(SIGTERM, spec_.shutdown_timeout);
      emit_stopped(events_, *group, emitted, "failure");
    }

    auto failures = reportable_failures(group->exits());
    if (failures.empty()) failures.push_back(*failure);
    ReportContext context;
    context.interpreter = spec_.interpreter;
    context.interpreter_choice = spec_.interpreter_choice;
    context.log_dir = temporary_log_dir.kept_dir();
    if (recovery) context.notes = recovery->notes();
    const std::string report =
        format_failure_report(spec_.entrypoint, host_, failures, context);
    std::fwrite(report.data(), 1, report.size(), stderr);
    std::fflush(stderr);
    co_await rendezvous_.finish(false);
    const int exit_code = exit_code_for(failures.front());
    emit_finish(events_, exit_code, "failed");
    co_return exit_code;
  }
}

}  // namespace ddp::agent
