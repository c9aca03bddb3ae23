// Deriving a round from the one before. A survivor knows its old group rank and rank base; the
// plan lists the lost members' group ranks and local world sizes, so every survivor moves down by
// the lost members ranked before it, in the same order as before, and no survivor reads more
// than the plan: O(losses) bytes, whatever the round's size.

#include "rendezvous/engine/derived_round.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace {

constexpr std::string_view kJoin = "join ";
// The plan document's version: a plan of another version comes from another ddprun release.
constexpr int kPlanVersion = 6;

}  // namespace

std::optional<DerivedRound> derivable(const RoundShape& prev, const RoundChanges& changes,
                                      int min_nodes) {
  if (changes.lost.empty() || !changes.waiting.empty() || !changes.failed.empty() ||
      changes.closed) {
    return std::nullopt;
  }
  if (changes.lost.size() > static_cast<std::size_t>(kMaxDerivedLosses)) return std::nullopt;
  DerivedRound derived;
  derived.from_round = prev.round;
  for (std::size_t i = 0; i < changes.lost_members.size(); ++i) {
    const auto& member = changes.lost_members[i];
    if (!member || member->group_rank >= prev.size) return std::nullopt;
    if (prev.host_first && member->group_rank == 0) return std::nullopt;  // the host went too
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

std::optional<int> derived_rank(const DerivedRound& derived, int group_rank) {
  int before = 0;
  for (const LostMember& lost : derived.lost) {
    if (lost.group_rank == group_rank) return std::nullopt;
    if (lost.group_rank < group_rank) ++before;
  }
  return group_rank - before;
}

DerivedPlace derived_place(const DerivedRound& derived, int group_rank, int rank_base) {
  DerivedPlace place{derived_rank(derived, group_rank).value_or(0), rank_base};
  for (const LostMember& lost : derived.lost) {
    if (lost.group_rank < group_rank) place.rank_base -= lost.local_world_size;
  }
  return place;
}

int lost_workers(const DerivedRound& derived) {
  int workers = 0;
  for (const LostMember& lost : derived.lost) workers += lost.local_world_size;
  return workers;
}

Bytes encode_plan(int size, const std::string& closer, const DerivedRound& derived) {
  return to_bytes(fmt::format("{} {} {}", size, closer, to_string(encode(derived))));
}

bool is_derived_plan(const Bytes& value) {
  const std::string text = to_string(value);
  return !text.empty() && text.front() >= '0' && text.front() <= '9' &&
         text.find(" {") != std::string::npos;
}

std::optional<DerivedRound> decode_plan(const Bytes& value, const std::string& what) {
  if (!is_derived_plan(value)) return std::nullopt;
  const std::string text = to_string(value);
  return decode_derived_round(to_bytes(text.substr(text.find(" {") + 1)), what);
}

Bytes join_plan(const std::string& closer) { return to_bytes(std::string(kJoin) + closer); }

bool is_join_plan(const Bytes& value) { return to_string(value).starts_with(kJoin); }

std::string plan_closer(const Bytes& value) {
  const std::string text = to_string(value);
  const std::size_t from = text.find(' ');
  if (from == std::string::npos) return {};
  const std::size_t to = text.find(' ', from + 1);
  return text.substr(from + 1, to == std::string::npos ? std::string::npos : to - from - 1);
}

int plan_size(const Bytes& value) {
  return parse_leading_number<int>(to_string(value)).value_or(0);
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LostMember, group_rank, local_world_size)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DerivedRound, from_round, lost, log, master_addr, master_port)

Bytes encode(const DerivedRound& derived) {
  nlohmann::json doc = derived;
  doc["version"] = kPlanVersion;
  return to_bytes(doc.dump());
}

DerivedRound decode_derived_round(const Bytes& bytes, const std::string& what) {
  const auto doc = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  const auto version = doc.is_object() ? doc.find("version") : doc.end();
  if (version == doc.end() || !version->is_number_integer()) {
    throw InternalError(fmt::format("rendezvous: {} is not a round plan: '{}'", what,
                                    to_string(bytes).substr(0, 200)));
  }
  if (*version != kPlanVersion) {
    throw ConfigError(fmt::format(
        "rendezvous: the plan in {} was written by another ddprun release (plan version {}, this "
        "agent reads version {}): run the same ddprun on every node of the job",
        what, version->get<long long>(), kPlanVersion));
  }
  try {
    return doc.get<DerivedRound>();
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(fmt::format("rendezvous: bad plan in {}: {}", what, e.what()));
  }
}

}  // namespace ddp::rdzv
