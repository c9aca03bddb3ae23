#pragma once
// The event key of a static round (round/<r>/event): lines "restart", "failed" and, written by
// the store when a node's lease expires, "lost node=<rank> host=<name> by=connection
// after_ms=<n>". Pure formatting and parsing; no store.

#include <optional>
#include <string>

#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

// The lease value of node `node_rank` (after_ms left for the store to fill in).
std::string static_lost_line(int node_rank, const std::string& host);

struct StaticRoundEvents {
  std::optional<NodeLoss> lost;  // the first lost node: "node <rank> (<host>)"
  int lost_rank = -1;            // its node rank
  bool failed = false;           // a "restart" or "failed" line: workers failed somewhere
};

StaticRoundEvents parse_static_events(const Bytes& value);

// "node 2 (host-b) was lost: its store connection closed and stayed closed for 300 ms"
std::string describe_loss(const NodeLoss& loss);

}  // namespace ddp::rdzv
