#pragma once
// The documents of a c10d round: each node's descriptor (written once when it joins) and the
// round's assignment (written once by the node that closed the round, read by every member).
// Pure functions: encoding, decoding and the deterministic rank order; no store, no Asio.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store.hpp"

namespace ddp::rdzv {

// What a node tells the others when it joins a round.
struct C10dNodeDesc {
  std::string name;  // unique node id ("<addr>_<pid>")
  std::string addr;  // advertised address
  int local_world_size = 1;
  bool is_host = false;
  std::string master_addr;  // hosts only: the worker store of this round ("" otherwise)
  std::uint16_t master_port = 0;
};

struct C10dMember {
  std::string name;
  int join_index = 0;  // 1-based arrival order in the round
  int local_world_size = 1;
};

// A closed round: members in group-rank order.
struct C10dAssignment {
  int round = 0;
  int restart_count = 0;
  std::string master_addr;
  std::uint16_t master_port = 0;
  // members[0] is the store host: it leaves last, so it alone closes the finished job.
  bool host_first = false;
  std::vector<C10dMember> members;

  // Group rank of the member that arrived join_index-th, or nullopt when it is not a member.
  std::optional<int> group_rank_of(int join_index) const;
};

Bytes encode(const C10dNodeDesc& desc);
// Throws InternalError naming `what` when the bytes are not a descriptor.
C10dNodeDesc decode_node_desc(const Bytes& bytes, const std::string& what);

Bytes encode(const C10dAssignment& assignment);
C10dAssignment decode_assignment(const Bytes& bytes, const std::string& what);

// The deterministic order of a round: the store host first, then by arrival. `nodes` are
// (join_index, descriptor) for indices 1..size. The worker store is the host's when a member
// hosts one, else `fallback_master` (the rendezvous store itself).
C10dAssignment assign_ranks(int round, int restart_count,
                            const std::vector<std::pair<int, C10dNodeDesc>>& nodes,
                            const std::pair<std::string, std::uint16_t>& fallback_master);

// This node's view of the round (group rank, rank base, world size, node names).
RendezvousInfo info_for(const C10dAssignment& assignment, int group_rank,
                        const std::string& run_id);

}  // namespace ddp::rdzv
