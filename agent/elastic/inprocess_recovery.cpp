// In-process recovery, the agent's half. The workers' half is python/ddprun/elastic.py; the
// channel between them is agent/process/reform_channel.cpp.
//
// Why a missing worker restarts the whole node rather than that one process: a worker that did
// not re-form is stuck in a collective or in init_process_group of the old round, or gone; its
// peers on this node are then waiting for it in the new round's init, and a fresh process for
// the same rank is what they wait for. Starting them all again is the ordinary path the agent
// has already (the same round, no rendezvous, no restart spent), and newcomers join the peers
// that did re-form on the other nodes.
//
// A worker that failed is different: its process is gone before the round changes, so its peers
// on this node re-form without a stuck rank among them. A hung worker (--hang_timeout) is made
// one: the agent stops that process alone before the round changes. The agent starts only that local rank
// again before the hand-over, and hand_over() leaves it out of the wait (`newcomers`): it joins
// from its start, and the live workers' re-form completes only once it has joined.

#include "agent/elastic/inprocess_recovery.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "agent/core/round_events.hpp"
#include "agent/stacks/stack_hook.hpp"
#include "common/log.hpp"
#include "common/progress_record.hpp"

namespace ddp::agent {
namespace {

// The variables of a round that a re-formed worker must see updated.
constexpr const char* kPlaceVariables[] = {"RANK",
                                           "LOCAL_RANK",
                                           "GROUP_RANK",
                                           "ROLE_RANK",
                                           "WORLD_SIZE",
                                           "GROUP_WORLD_SIZE",
                                           "ROLE_WORLD_SIZE",
                                           "LOCAL_WORLD_SIZE",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "TORCHELASTIC_RESTART_COUNT"};

// Sets `key` in both of a spec's views of its environment (env stays sorted by key).
void set_env(WorkerSpec& spec, const std::string& key, const std::string& value) {
  spec.ddprun_env[key] = value;
  const std::string prefix = key + "=";
  const auto at = std::lower_bound(spec.env.begin(), spec.env.end(), prefix);
  if (at != spec.env.end() && at->starts_with(prefix)) {
    *at = prefix + value;
  } else {
    spec.env.insert(at, prefix + value);
  }
}

std::int64_t ms_since(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

}  // namespace

void keep_started_files(std::vector<WorkerSpec>& specs, const std::vector<WorkerSpec>& started) {
  for (std::size_t i = 0; i < specs.size() && i < started.size(); ++i) {
    WorkerSpec& spec = specs[i];
    const WorkerSpec& old = started[i];
    spec.log_dir = old.log_dir;
    spec.stdout_path = old.stdout_path;
    spec.stderr_path = old.stderr_path;
    spec.error_file = old.error_file;
    for (const char* key : {kProgressFileEnv, kStackDirEnv, "TORCHELASTIC_ERROR_FILE"}) {
      if (const auto it = old.ddprun_env.find(key); it != old.ddprun_env.end()) {
        set_env(spec, key, it->second);
      }
    }
  }
}

WorkerPlace place_of(int round, const WorkerSpec& spec) {
  WorkerPlace place;
  place.round = round;
  place.local_rank = spec.local_rank;
  for (const char* name : kPlaceVariables) {
    if (const auto it = spec.ddprun_env.find(name); it != spec.ddprun_env.end()) {
      place.env[name] = it->second;
    }
  }
  return place;
}

InprocessRecovery::InprocessRecovery(std::chrono::milliseconds reform_timeout,
                                     WorkerHandover& handover, EventSink& events,
                                     std::string state_dir)
    : reform_timeout_(reform_timeout),
      state_dir_(std::move(state_dir)),
      handover_(handover),
      events_(events) {}

void InprocessRecovery::prepare(std::vector<WorkerSpec>& specs) const {
  const std::string address = handover_.address();
  for (WorkerSpec& spec : specs) {
    set_env(spec, kReformSocketEnv, address);
    set_env(spec, kReformLocalRankEnv, std::to_string(spec.local_rank));
    set_env(spec, kReformStateDirEnv, state_dir_);
  }
}

void InprocessRecovery::publish(int round, const std::vector<WorkerSpec>& specs) {
  std::vector<WorkerPlace> places;
  for (const WorkerSpec& spec : specs) places.push_back(place_of(round, spec));
  handover_.publish(places);
}

void InprocessRecovery::keep_workers(const rdzv::RoundEvent& event) {
  emit_node_losses(events_, event);
  if (pending_) return;  // the workers still wait for the first change's hand-over
  pending_ =
      Pending{round_change_name(event.change), event.detail, std::chrono::steady_clock::now()};
}

void InprocessRecovery::keep_workers_after_failure(const std::string& detail) {
  if (pending_) return;
  pending_ = Pending{"worker_failed", detail, std::chrono::steady_clock::now()};
}

std::set<int> InprocessRecovery::not_connected(const std::vector<pid_t>& pids) const {
  std::set<int> out;
  for (std::size_t local_rank = 0; local_rank < pids.size(); ++local_rank) {
    const int seen = handover_.connected_pid(static_cast<int>(local_rank));
    if (seen != 0 && seen != pids[local_rank]) out.insert(static_cast<int>(local_rank));
  }
  return out;
}

boost::asio::awaitable<bool> InprocessRecovery::hand_over(int round,
                                                          const std::vector<WorkerSpec>& specs,
                                                          const std::set<int>& newcomers) {
  const Pending pending = pending_.value();
  auto log = log::get("agent");
  publish(round, specs);
  std::vector<int> local_ranks;
  for (const WorkerSpec& spec : specs) {
    if (newcomers.count(spec.local_rank) == 0) local_ranks.push_back(spec.local_rank);
  }
  const auto handed = std::chrono::steady_clock::now();
  const std::vector<int> missing =
      co_await handover_.wait_reformed(round, local_ranks, reform_timeout_);
  pending_.reset();  // not when cancelled: the next round's hand-over serves the same change
  if (missing.empty()) {
    log->info("workers re-formed in round {} cause={} after {} ms ({} ms since the hand-over)",
              round, pending.cause, ms_since(pending.since), ms_since(handed));
    events_.emit(Event("reform")
                     .with("round", round)
                     .with("cause", pending.cause)
                     .with("ms", ms_since(pending.since))
                     .with("handover_ms", ms_since(handed))
                     .with("workers", static_cast<std::int64_t>(local_ranks.size())));
    co_return true;
  }
  const bool timed_out = ms_since(handed) >= reform_timeout_.count();
  const std::string why = timed_out ? fmt::format("not re-formed within reform_timeout={}s",
                                                  reform_timeout_.count() / 1000)
                                    : std::string("gone, or not using ddprun.elastic");
  log->warn("local ranks {} did not re-form in round {} ({}); restarting this node's workers in it",
            fmt::join(missing, ","), round, why);
  notes_.push_back(fmt::format("local ranks {} were started again in round {} ({})",
                               fmt::join(missing, ","), round, why));
  events_.emit(Event("reform_failed")
                   .with("round", round)
                   .with("cause", pending.cause)
                   .with("reason", timed_out ? "timeout" : "no_channel")
                   .with("local_ranks", std::vector<std::int64_t>(missing.begin(), missing.end())));
  co_return false;
}

}  // namespace ddp::agent
