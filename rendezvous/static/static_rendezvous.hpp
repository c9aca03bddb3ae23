#pragma once
// StaticRendezvous: --rdzv_backend=static (torchrun's default in 1.13). Node ranks are given.
// Node 0 hosts the store in-process (TcpStoreServer on the agent's io_context) at
// master_addr:master_port, or on a free port (bound as port 0, read back) when one node runs
// without --master_port. Other nodes connect with backoff until the rendezvous timeout.
//
// Unlike torchrun's static backend, rounds are coordinated: a worker failure on any node spends
// one job-wide restart (counted in the store) and wakes every other node's watch_round(), so all
// nodes restart their workers together; the exit barrier keeps the store host up until every
// node has left. Store keys (under "/ddprun/<run_id>/"):
//   round/<r>/node/<node_rank>  {"host","local_world_size"} or {"closed": reason}
//   round/<r>/failed            the first failure report of round r (compare_set)
//   round/<r>/restart           the restart count after round r's failure
//   round/<r>/event             the round's change log (engine/round_changes.hpp): "failed
//                               <node> <what>" lines, and "lost <host> ... rank=<node_rank>",
//                               which the store appends when a node's lease expires
//                               (store_lease.hpp); wakes the round's watchers
//   round/<r>/finished          count of nodes whose workers succeeded
//   round/<r>/end               "finished" | "restart" | "failed" (wakes the exit barrier)
//   restart_count, closed, left/<node_rank>, nodes/<node_rank>/lease(.held)
// A lost node ends a static job (its rank cannot be filled): the survivors close it naming the
// node, and a worker failure that follows the loss is reported as the loss.
// Everything runs on the agent's io_context; nothing blocks the loop.

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/job_guards.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

struct StaticRendezvousOptions {
  std::string run_id = "none";
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // where node 0 listens and everyone connects
  std::uint16_t master_port = 0;          // 0: a free port (one node only)
  std::chrono::milliseconds timeout{std::chrono::seconds(900)};  // join and exit barrier
  // How long the store host waits, when it leaves, for the other nodes to leave first.
  std::chrono::milliseconds leave_timeout{std::chrono::seconds(60)};
  // While nodes are missing, a warning every this long (at most timeout/4) names them; torchrun
  // prints nothing.
  std::chrono::milliseconds progress_interval{std::chrono::seconds(10)};
  int max_restarts = 0;   // next_round throws RendezvousClosedError once the count exceeds it
  // A node whose store connection closed and was not re-made within this is lost.
  std::chrono::milliseconds connection_grace{300};
  std::chrono::milliseconds verdict_margin{1000};  // failure_verdict's wait beyond the grace
  std::string node_name;  // this node's host name (RendezvousInfo::node_names, errors)
  // The job secret and who node 0's store admits (docs/security.md); the clients present the
  // credentials given here.
  JobSecurity security;
};

class StaticRendezvous final : public Rendezvous {
 public:
  // Node 0 binds its store here: throws IoError naming the address (and the owner of a taken
  // port). Other nodes connect in the first next_round().
  StaticRendezvous(boost::asio::io_context& io, StaticRendezvousOptions options);
  ~StaticRendezvous() override;

  // Throws TimeoutError naming node 0 when its store never answers, or the node ranks that never
  // joined the round; RendezvousClosedError once the job failed or the restarts are spent.
  asio::awaitable<RendezvousInfo> next_round(int local_world_size) override;
  asio::awaitable<RoundEvent> watch_round() override;
  asio::awaitable<int> report_failure(std::string what) override;
  asio::awaitable<std::optional<RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point failed_at) override;
  asio::awaitable<void> finish(bool success) override;

  // The port the store listens on (node 0) or is reached at (others).
  std::uint16_t store_port() const;

  struct State;

 private:
  std::shared_ptr<State> state_;  // shared with the background watcher of the current round
};

}  // namespace ddp::rdzv
