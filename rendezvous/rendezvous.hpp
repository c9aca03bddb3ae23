#pragma once
// Rendezvous: how the agents of one job agree, round by round, on membership, ranks, the job-wide
// restart count and the store their workers meet at. Implementations: LocalRendezvous (one node,
// no peers), StaticRendezvous (--node_rank), C10dRendezvous (--rdzv_backend=c10d, elastic).
// All methods run on the agent's io_context; none blocks the loop.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ddp::rdzv {

namespace asio = boost::asio;

// The outcome of one closed round, as seen by one node.
struct RendezvousInfo {
  std::string run_id;
  int round = 0;             // rounds closed before this one in this job (0 for the first)
  int group_rank = 0;        // this node's rank in the round (GROUP_RANK)
  int group_world_size = 1;  // nodes in the round (GROUP_WORLD_SIZE)
  int rank_base = 0;         // global rank of this node's local rank 0
  int world_size = 1;        // workers in the round over all nodes (WORLD_SIZE)
  int restart_count = 0;     // job-wide restarts spent so far (TORCHELASTIC_RESTART_COUNT)
  std::string master_addr;   // where workers reach the store (MASTER_ADDR)
  std::uint16_t master_port = 0;        // (MASTER_PORT)
  std::vector<std::string> node_names;  // static only: "host" of each node, by group rank (logs)
};

// Where a node's --node_rank hint (-1: none) puts it among an elastic round's members, the
// smaller first: hinted nodes by hint, then every node without one (ties go by arrival).
inline int rank_hint_order(int rank_hint) {
  return rank_hint < 0 ? std::numeric_limits<int>::max() : rank_hint;
}

// Why a running round has to end for a reason outside this node.
enum class RoundChange {
  kPeerFailed,   // another node's workers failed; that node already spent the restart
  kNodeLost,     // a node stopped heartbeating
  kNodeWaiting,  // a new node waits to join (scale-up: no restart is spent)
};

// A node the round lost: how that was found out, and how long it took (the closed connection's
// grace, or the time without a heartbeat).
struct NodeLoss {
  std::string node;
  std::string detected_by;  // "connection" | "heartbeat" | "lease" (etcd)
  std::chrono::milliseconds after{0};
};

struct RoundEvent {
  RoundChange change;
  std::string detail;  // names the node(s) involved, for logs and reports
  std::vector<NodeLoss> lost = {};  // kNodeLost: each lost node
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Joins the next round with this node's worker count and returns once the round closes.
  // Throws TimeoutError naming the missing nodes, RendezvousClosedError when the job has ended
  // (failed or finished elsewhere), IoError when the store host is gone.
  virtual asio::awaitable<RendezvousInfo> next_round(int local_world_size) = 0;

  // While this node's workers run: completes when the round must end because of another node.
  // The agent races it against its own workers and cancels it (per-operation cancellation) when
  // they finish first. Never completes on a single-node job.
  virtual asio::awaitable<RoundEvent> watch_round() = 0;

  // This node's workers failed in the current round: spends one job-wide restart (at most one per
  // round, whoever reports first) and tells the other nodes. Returns the restart count after it.
  virtual asio::awaitable<int> report_failure(std::string what) = 0;

  // This node's workers failed at `failed_at` (steady clock). Waits briefly (as long as the
  // backend takes to find a lost node: c10d's connection grace, etcd's lease TTL; plus a margin)
  // for the verdict on whether the failure follows from another node: a node of the round was
  // lost (kNodeLost), or another node's workers failed first and spent the round's restart
  // (kPeerFailed). Either way this node spends none. nullopt when every node is alive and none
  // failed first: the failure is this node's to report. Backends that cannot tell return nullopt
  // at once.
  virtual asio::awaitable<std::optional<RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point failed_at) {
    (void)failed_at;
    co_return std::nullopt;
  }

  // The exit barrier. success: returns once every node of the round has finished, so the store
  // host outlives its clients. failure: marks the job failed (others' next_round then throws
  // RendezvousClosedError) and returns at once.
  virtual asio::awaitable<void> finish(bool success) = 0;
};

}  // namespace ddp::rdzv
