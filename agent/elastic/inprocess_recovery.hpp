#pragma once
// InprocessRecovery: the agent's side of --recovery=inprocess. When the round ends because of
// another node (a node lost, a node waiting to join, another node's worker failed), the agent
// keeps its live workers instead of stopping them, joins the next round as it always does, and
// then this hands every worker its new place over a WorkerHandover and waits up to
// --rdzv_conf=reform_timeout for each to re-form. A worker that does not (it is stuck, it died,
// it never used the channel) costs a restart of this node's workers in the same round: they
// start again the ordinary way and join their re-formed peers as newcomers. A worker of this
// node that failed ends the round too (the agent spends the restart): its live peers stay, and
// the agent starts only it again, as a newcomer, before the hand-over.
// Owned by ElasticAgent; agent thread only.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

#include "agent/core/event_log.hpp"
#include "agent/core/worker_handover.hpp"
#include "agent/core/worker_spec.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

class InprocessRecovery {
 public:
  // `handover` and `events` must outlive this. `reform_timeout`: --rdzv_conf=reform_timeout.
  // `state_dir`: where a worker that gives up its place leaves its last commit (the run dir).
  InprocessRecovery(std::chrono::milliseconds reform_timeout, WorkerHandover& handover,
                    EventSink& events, std::string state_dir);

  // Adds the channel's variables (DDPRUN_REFORM_SOCKET, DDPRUN_REFORM_LOCAL_RANK,
  // DDPRUN_REFORM_STATE_DIR) to every spec.
  void prepare(std::vector<WorkerSpec>& specs) const;

  // Makes `specs` round `round`'s places: workers started for it read theirs on connecting.
  void publish(int round, const std::vector<WorkerSpec>& specs);

  // The round ends because of another node and the live workers stay: emits node_lost per lost
  // node and remembers the cause and the time for the reform event. A hand-over still pending (the
  // round ended again during it) keeps the first cause and time.
  void keep_workers(const rdzv::RoundEvent& event);

  // The round ends because a worker of this node failed (`detail` describes it) and its live
  // peers stay: as keep_workers(), with the cause "worker_failed".
  void keep_workers_after_failure(const std::string& detail);

  // True between keep_workers() and the hand_over() that follows it.
  bool has_pending() const { return pending_.has_value(); }

  // Hands the kept workers their places in round `round` (`specs`: that round's, prepared) and
  // waits up to reform_timeout for every one to re-form, except `newcomers`: local ranks whose
  // new processes join the round from their start (the kept ones cannot re-form without them). Returns true when all did (event
  // reform); false when some did not (event reform_failed, naming them), and the caller stops
  // and restarts this node's workers. Clears the pending hand-over either way; cancelled, it
  // leaves it pending.
  boost::asio::awaitable<bool> hand_over(int round, const std::vector<WorkerSpec>& specs,
                                         const std::set<int>& newcomers = {});

  // The local ranks whose processes (`pids`, by local rank) have not connected to the channel
  // while an earlier process of the same local rank did: started for an earlier round, they
  // read the newest place when they connect, so they join the next round from their start as
  // newcomers do. A local rank that no process ever connected as is not among them (its
  // script may not use ddprun.elastic).
  std::set<int> not_connected(const std::vector<pid_t>& pids) const;

  // One line per hand-over that ended in a start, for the failure report's notes.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Pending {
    std::string cause;  // round_change_name()
    std::string detail;
    std::chrono::steady_clock::time_point since;
  };

  std::chrono::milliseconds reform_timeout_;
  std::string state_dir_;
  WorkerHandover& handover_;
  EventSink& events_;
  std::optional<Pending> pending_;
  std::vector<std::string> notes_;
};

// After a hand-over: `specs` (the new round's) take back from `started` (what the kept workers
// were started with) the files those processes use: log dir, output and error files, progress
// file and stack dir, which name the attempt they started in, not the new round's restart count.
void keep_started_files(std::vector<WorkerSpec>& specs, const std::vector<WorkerSpec>& started);

// The torchrun variables a worker takes over from a new round (RANK, LOCAL_RANK, WORLD_SIZE,
// GROUP_RANK, ..., MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT) from `spec`.
WorkerPlace place_of(int round, const WorkerSpec& spec);

}  // namespace ddp::agent
