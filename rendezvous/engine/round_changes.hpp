#pragma once
// What happened to a running round (RoundChanges), as every backend reports it to the agent, and
// c10d's change log that carries it: an append-only store value, one line per event ("lost
// <node> by=<how> after_ms=<n> rank=<group rank> lws=<n>", "waiting <node>", "failed <node>
// <what>", "closed <why>"). Every c10d member waits on the log; etcd fills the same struct from
// its round's watch. Whoever sees a change first ends its round. Pure parsing; no store.

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

inline constexpr const char* kJobFinished = "job finished";

// Why a job closes when a node's workers failed with no restart left: "workers failed on node
// <node>[: <what>]" (what report_failure was told).
std::string workers_failed_reason(const std::string& node, const std::optional<std::string>& what);

// Why a job closes when too few nodes are left for the next round: "only <left> node(s) remain
// after losing <lost, ...> (--nnodes min is <min>)", or "after round <round>" when the losses are
// not known by name.
std::string too_few_left(const std::vector<std::string>& lost, int left, int min_nodes,
                         int round);

// Where a lost member sat in the round whose log names it: what the survivors need to derive
// their places in the next round without re-joining (c10d_derived.hpp).
struct LostMember {
  int group_rank = 0;
  int local_world_size = 1;
};

struct RoundChanges {
  std::vector<std::string> lost;     // nodes declared lost (distinct)
  std::vector<NodeLoss> losses;      // the same nodes, with how and when (first line of each)
  // The same nodes' places (nullopt: the line did not say, so no round can be derived from it).
  std::vector<std::optional<LostMember>> lost_members;
  std::vector<std::string> waiting;  // late nodes waiting to join (distinct)
  std::vector<std::string> failed;   // "<node> <what>" lines, in order
  std::optional<std::string> closed; // the job ended: why

  // A loss: the first word on a node stands, but a later one may add where it sat (`member`).
  void record_loss(NodeLoss loss, const std::optional<LostMember>& member);
  void add_waiting(const std::string& node);  // once per node

  bool empty() const { return lost.empty() && waiting.empty() && failed.empty() && !closed; }
  // The job ended because every node finished (not because one failed).
  bool finished() const { return closed && *closed == kJobFinished; }
  // The event the agent acts on: failure or close first, then loss, then waiting nodes. While
  // this node is in the exit barrier (`finishing`) only failures count: a waiting node does not
  // restart a job that is done, and a lost node only shortens the barrier.
  std::optional<RoundEvent> first_event(bool finishing = false) const;
  // The kNodeLost event when a node was lost (whatever else happened), else nullopt.
  std::optional<RoundEvent> loss_event() const;
  // Why this node's worker failure follows from another node (failure_verdict): a lost node,
  // else another node's failure or the job's end. nullopt: nothing outside this node explains it.
  std::optional<RoundEvent> failure_cause() const;
  // Members the next round should expect: this round's size minus the lost plus the waiting,
  // at most max_nodes.
  int expected_next(int size, int max_nodes) const;
};

RoundChanges parse_changes(const Bytes& log);

// `how` is "connection" or "heartbeat"; `after_ms` is a number, or kLeaseAfterMs in a lease's
// value (the store fills it in); `member` is the node's place in the round of this log, when known.
Bytes lost_line(const std::string& node, const std::string& how, const std::string& after_ms,
                const std::optional<LostMember>& member = std::nullopt);
Bytes waiting_line(const std::string& node);
Bytes failed_line(const std::string& node, const std::string& what);
Bytes closed_line(const std::string& why);

}  // namespace ddp::rdzv
