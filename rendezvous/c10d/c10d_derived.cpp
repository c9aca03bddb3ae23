// Deriving a round from the one before. A survivor knows its old group rank and rank base; the
// plan lists the lost members' group ranks and local world sizes, so every survivor moves down by
// the lost members ranked before it, in the same order as before, and no survivor reads more
// than the plan: O(losses) bytes, whatever the round's size.

#include "rendezvous/c10d/c10d_derived.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace {
constexpr std::string_view kJoin = "join ";
}  // namespace

std::optional<C10dDerivedRound> derivable(const C10dRoundHeader& prev, const RoundChanges& changes,
                                          int min_nodes) {
  if (changes.lost.empty() || !changes.waiting.empty() || !changes.failed.empty() ||
      changes.closed) {
    return std::nullopt;
  }
  if (changes.lost.size() > static_cast<std::size_t>(kC10dMaxDerivedLosses)) return std::nullopt;
  C10dDerivedRound derived;
  derived.from_round = prev.round;
  for (std::size_t i = 0; i < changes.lost_members.size(); ++i) {
    const auto& member = changes.lost_members[i];
    if (!member || member->group_rank >= prev.size) return std::nullopt;
    if (prev.host_first && member->group_rank == 0) return std::nullopt;  // the store went too
    derived.lost.push_back(*member);
    const NodeLoss& loss = changes.losses[i];
    derived.log += to_string(lost_line(loss.node, loss.detected_by,
                                       std::to_string(loss.after.count()), member));
  }
  std::sort(derived.lost.begin(), derived.lost.end(),
            [](const auto& a, const auto& b) { return a.group_rank < b.group_rank; });
  const auto same = [](const auto& a, const auto& b) { return a.group_rank == b.group_rank; };
  if (std::adjacent_find(derived.lost.begin(), derived.lost.end(), same) != derived.lost.end()) {
    return std::nullopt;  // two names at one place: not a log this protocol writes
  }
  if (prev.size - static_cast<int>(derived.lost.size()) < std::max(min_nodes, 1)) {
    return std::nullopt;  // the full path closes the job, naming the lost
  }
  return derived;
}

std::optional<int> derived_rank(const C10dDerivedRound& derived, int group_rank) {
  int before = 0;
  for (const LostMember& lost : derived.lost) {
    if (lost.group_rank == group_rank) return std::nullopt;
    if (lost.group_rank < group_rank) ++before;
  }
  return group_rank - before;
}

std::pair<C10dRoundHeader, C10dPlace> derive(const C10dRoundHeader& prev, const C10dPlace& place,
                                             const C10dDerivedRound& derived) {
  C10dRoundHeader header = prev;
  header.round = prev.round + 1;
  header.derived = true;
  if (!derived.master_addr.empty()) {
    header.master_addr = derived.master_addr;
    header.master_port = derived.master_port;
  }
  C10dPlace next;
  next.rank_base = place.rank_base;
  for (const LostMember& lost : derived.lost) {
    --header.size;
    header.world_size -= lost.local_world_size;
    if (lost.group_rank < place.group_rank) next.rank_base -= lost.local_world_size;
  }
  next.group_rank = derived_rank(derived, place.group_rank).value_or(0);
  // The ring neighbour's join index follows from the rank; its name is not known here.
  if (header.size > 1) next.neighbour_index = (next.group_rank + 1) % header.size + 1;
  return {header, next};
}

Bytes encode_derived_size(int size, const std::string& closer, const C10dDerivedRound& derived) {
  return to_bytes(fmt::format("{} {} {}", size, closer, to_string(encode(derived))));
}

std::optional<C10dDerivedRound> decode_derived_size(const Bytes& value, const std::string& what) {
  const std::string text = to_string(value);
  const std::size_t brace = text.find(" {");
  if (text.empty() || text.front() < '0' || text.front() > '9' || brace == std::string::npos) {
    return std::nullopt;
  }
  return decode_derived_round(to_bytes(text.substr(brace + 1)), what);
}

Bytes join_plan(const std::string& closer) { return to_bytes(std::string(kJoin) + closer); }

bool is_join_plan(const Bytes& value) { return to_string(value).starts_with(kJoin); }

}  // namespace ddp::rdzv
