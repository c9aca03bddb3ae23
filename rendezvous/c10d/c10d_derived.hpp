#pragma once
// A c10d round derived from the one before it: its members minus the lost, in the same order, so
// that each survivor finds its new place from its old one and the short list of lost members,
// without re-joining. The plan is the value of r<N+1>/size, written once (compare_set, first
// wins): a derived round, or "join <node>" (every node joins round N+1 as in a fresh round).
// Pure functions; no store. The protocol around it: c10d_reform.cpp, docs/rendezvous.md.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/c10d/c10d_assignment.hpp"
#include "rendezvous/engine/round_changes.hpp"

namespace ddp::rdzv {

// More losses at once than this re-join in full: the plan stays a few hundred bytes, read by
// every survivor.
inline constexpr int kC10dMaxDerivedLosses = 64;

struct C10dDerivedRound {
  int from_round = 0;
  std::vector<LostMember> lost;  // distinct group ranks of from_round, ascending
  std::string log;  // their lost lines: members that wait for the plan learn whom they lost
  std::string master_addr;           // the store host's fresh worker store ("": as before)
  std::uint16_t master_port = 0;
};

// The derived round the change log of `prev` allows, or nullopt when the survivors must re-join:
// nothing but lost lines (a waiting node, a failure, the job's end all re-join), each with its
// place, at most kC10dMaxDerivedLosses of them, not the store host, and min_nodes still met.
std::optional<C10dDerivedRound> derivable(const C10dRoundHeader& prev, const RoundChanges& changes,
                                          int min_nodes);

// The round a member of `prev` at `place` runs in next: header (derived = true) and its place.
// Its join index there is its group rank + 1. REQUIRES: place's member is not lost.
std::pair<C10dRoundHeader, C10dPlace> derive(const C10dRoundHeader& prev, const C10dPlace& place,
                                             const C10dDerivedRound& derived);

// A group rank of `derived.from_round` in the derived round; nullopt for a lost member.
std::optional<int> derived_rank(const C10dDerivedRound& derived, int group_rank);

// r<N+1>/size values: "<size> <closer> {json}" for a derived round (its leading size is what
// readers of a closed round's size expect), "join <closer>" for a full round.
Bytes encode_derived_size(int size, const std::string& closer, const C10dDerivedRound& derived);
// nullopt when `value` is not a derived round (a join plan, a closed round's "<size> <closer>",
// "closed"); InternalError or ConfigError (another release) when its document is bad.
std::optional<C10dDerivedRound> decode_derived_size(const Bytes& value, const std::string& what);
Bytes join_plan(const std::string& closer);
bool is_join_plan(const Bytes& value);

// The plan's JSON document (c10d_assignment_json.cpp, with the other documents' version).
Bytes encode(const C10dDerivedRound& derived);
C10dDerivedRound decode_derived_round(const Bytes& bytes, const std::string& what);

}  // namespace ddp::rdzv
