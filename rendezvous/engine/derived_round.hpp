#pragma once
// A round derived from the one before it: its members minus the lost, in the same order, so that
// each survivor finds its new place from its old one and the short list of lost members, without
// re-joining. The plan of round N+1 is one value, written once (create-if-absent, first wins): a
// derived round "<size> <closer> {json}", or "join <closer>" (every node joins round N+1 as in a
// fresh round). Both backends keep it where a closing round's size would go (c10d: r<N+1>/size,
// etcd: r<N+1>/assignment), so a plan and a round closed by arrivals exclude each other.
// Pure functions; no store. The protocol around it: round_plan.hpp, docs/rendezvous.md.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/engine/round_changes.hpp"

namespace ddp::rdzv {

// More losses at once than this re-join in full: the plan stays a few hundred bytes, read by
// every survivor.
inline constexpr int kMaxDerivedLosses = 64;

struct DerivedRound {
  int from_round = 0;
  std::vector<LostMember> lost;  // distinct group ranks of from_round, ascending
  std::string log;  // their lost lines: members that wait for the plan learn whom they lost
  std::string master_addr;           // the host's fresh worker store ("": as before)
  std::uint16_t master_port = 0;
};

// What derivation needs of the round it starts from.
struct RoundShape {
  int round = 0;
  int size = 0;             // members
  bool host_first = false;  // group rank 0 hosts what the round needs: its loss re-joins
};

// The derived round the changes of `prev` allow, or nullopt when the survivors must re-join:
// nothing but lost lines (a waiting node, a failure, the job's end all re-join), each with its
// place, at most kMaxDerivedLosses of them, not the host, and min_nodes still met.
std::optional<DerivedRound> derivable(const RoundShape& prev, const RoundChanges& changes,
                                      int min_nodes);

// A group rank of `derived.from_round` in the derived round; nullopt for a lost member.
std::optional<int> derived_rank(const DerivedRound& derived, int group_rank);

// A survivor's place in the derived round, from its place in the round before.
struct DerivedPlace {
  int group_rank = 0;
  int rank_base = 0;  // global rank of its local rank 0
};
// REQUIRES: the member at `group_rank` is not lost.
DerivedPlace derived_place(const DerivedRound& derived, int group_rank, int rank_base);
// The workers of the lost members.
int lost_workers(const DerivedRound& derived);

// Plan values (see above). decode_plan: nullopt when `value` is not a derived round (a join plan,
// a closed round's header or "<size> <closer>", "closed"); InternalError or ConfigError (another
// release) when its document is bad.
Bytes encode_plan(int size, const std::string& closer, const DerivedRound& derived);
std::optional<DerivedRound> decode_plan(const Bytes& value, const std::string& what);
Bytes join_plan(const std::string& closer);
bool is_join_plan(const Bytes& value);
// Whether `value` is a derived plan (cheap: no parse).
bool is_derived_plan(const Bytes& value);
// The closer named in a plan ("<size> <closer> ...", "join <closer>").
std::string plan_closer(const Bytes& value);
// The size a plan (or c10d's "<size> <closer>") leads with; 0 for a join plan.
int plan_size(const Bytes& value);

// The plan's JSON document.
Bytes encode(const DerivedRound& derived);
DerivedRound decode_derived_round(const Bytes& bytes, const std::string& what);

}  // namespace ddp::rdzv
