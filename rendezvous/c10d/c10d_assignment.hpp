#pragma once
// The documents of a c10d round: each node's descriptor (written once when it joins) and, written
// once by the node that closed the round, its header (read by every node) and each member's place
// (read by that member alone), so that what a node reads does not grow with the round.
// Pure functions: encoding, decoding and the deterministic rank order; no store, no Asio.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/engine/derived_round.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

// What a node tells the others when it joins a round.
struct C10dNodeDesc {
  std::string name;  // unique node id ("<addr>_<pid>")
  std::string addr;  // advertised address
  int local_world_size = 1;
  bool is_host = false;
  std::string master_addr;  // hosts only: the worker store of this round ("" otherwise)
  std::uint16_t master_port = 0;
  int rank_hint = -1;  // >= 0: the node's wished place (--node_rank); not sent when -1
};

struct C10dMember {
  std::string name;
  int join_index = 0;  // 1-based arrival order in the round
  int local_world_size = 1;
};

// A closed round as its closer computes it: members in group-rank order.
struct C10dAssignment {
  int round = 0;
  int restart_count = 0;
  std::string master_addr;
  std::uint16_t master_port = 0;
  // members[0] is the store host: it leaves last, so it alone closes the finished job.
  bool host_first = false;
  std::vector<C10dMember> members;
};

// What every node reads of a closed round (O(1) bytes). Its members are the arrivals 1..size.
struct C10dRoundHeader {
  int round = 0;
  int restart_count = 0;
  std::string master_addr;
  std::uint16_t master_port = 0;
  bool host_first = false;
  int size = 0;        // members (the group world size)
  int world_size = 0;  // workers of every member
  // Derived from the round before (engine/derived_round.hpp): its members did not join by
  // arrival, so every arrival in it is late.
  bool derived = false;
};

// What one member reads of its own place in a closed round.
struct C10dPlace {
  int group_rank = 0;
  int rank_base = 0;  // global rank of its local rank 0
};

C10dRoundHeader header_of(const C10dAssignment& assignment);
// Every member's place, in group-rank order (one pass: the closer publishes them all).
std::vector<C10dPlace> places_of(const C10dAssignment& assignment);

Bytes encode(const C10dNodeDesc& desc);
// Each decode throws InternalError naming `what` when the bytes are not that document.
C10dNodeDesc decode_node_desc(const Bytes& bytes, const std::string& what);

Bytes encode(const C10dRoundHeader& header);
C10dRoundHeader decode_round_header(const Bytes& bytes, const std::string& what);

Bytes encode(const C10dPlace& place);
C10dPlace decode_place(const Bytes& bytes, const std::string& what);

// The deterministic order of a round: the store host first, then nodes with a rank hint by hint
// (a --hostfile launch's file order), then the others by arrival. `nodes` are
// (join_index, descriptor) for indices 1..size. The worker store is the host's when a member
// hosts one, else `fallback_master` (the rendezvous store itself).
C10dAssignment assign_ranks(int round, int restart_count,
                            const std::vector<std::pair<int, C10dNodeDesc>>& nodes,
                            const std::pair<std::string, std::uint16_t>& fallback_master);

// The shape derivation reads of a round (engine/derived_round.hpp).
RoundShape shape_of(const C10dRoundHeader& header);
// The round a member of `prev` at `place` runs in next: header (derived = true) and its place.
// Its join index there is its group rank + 1. REQUIRES: place's member is not lost.
std::pair<C10dRoundHeader, C10dPlace> derive(const C10dRoundHeader& prev, const C10dPlace& place,
                                             const DerivedRound& derived);

// This node's view of the round (group rank, rank base, world size). node_names stays empty: no
// member reads the others' names.
RendezvousInfo info_for(const C10dRoundHeader& header, const C10dPlace& place,
                        const std::string& run_id);

}  // namespace ddp::rdzv
