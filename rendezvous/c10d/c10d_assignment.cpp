// The c10d round's rank order. A round is published as a header that every node reads and one
// small place per member: at 1,024 nodes a whole member list read by each of them was 1,024
// copies of a 30 KB document, parsed into about 100 fresh pages of memory per agent.

#include "rendezvous/c10d/c10d_assignment.hpp"

#include <algorithm>

namespace ddp::rdzv {

C10dAssignment assign_ranks(int round, int restart_count,
                            const std::vector<std::pair<int, C10dNodeDesc>>& nodes,
                            const std::pair<std::string, std::uint16_t>& fallback_master) {
  std::vector<std::pair<int, C10dNodeDesc>> order = nodes;
  // Hosts first (there is at most one in a healthy job), then hinted nodes by hint (an unhinted
  // node's -1 sorts last), then arrival order.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.is_host != b.second.is_host) return a.second.is_host;
    const int hint_a = rank_hint_order(a.second.rank_hint);
    const int hint_b = rank_hint_order(b.second.rank_hint);
    if (hint_a != hint_b) return hint_a < hint_b;
    return a.first < b.first;
  });
  C10dAssignment a;
  a.round = round;
  a.restart_count = restart_count;
  a.master_addr = fallback_master.first;
  a.master_port = fallback_master.second;
  a.host_first = !order.empty() && order.front().second.is_host;
  if (a.host_first && !order.front().second.master_addr.empty()) {
    a.master_addr = order.front().second.master_addr;
    a.master_port = order.front().second.master_port;
  }
  for (const auto& [index, desc] : order) {
    a.members.push_back({desc.name, index, desc.local_world_size});
  }
  return a;
}

C10dRoundHeader header_of(const C10dAssignment& a) {
  C10dRoundHeader h;
  h.round = a.round;
  h.restart_count = a.restart_count;
  h.master_addr = a.master_addr;
  h.master_port = a.master_port;
  h.host_first = a.host_first;
  h.size = static_cast<int>(a.members.size());
  for (const C10dMember& m : a.members) h.world_size += m.local_world_size;
  return h;
}

std::vector<C10dPlace> places_of(const C10dAssignment& a) {
  const auto size = static_cast<int>(a.members.size());
  std::vector<C10dPlace> places;
  int rank_base = 0;
  for (int g = 0; g < size; ++g) {
    C10dPlace p;
    p.group_rank = g;
    p.rank_base = rank_base;
    rank_base += a.members[static_cast<std::size_t>(g)].local_world_size;
    places.push_back(std::move(p));
  }
  return places;
}

RendezvousInfo info_for(const C10dRoundHeader& header, const C10dPlace& place,
                        const std::string& run_id) {
  RendezvousInfo info;
  info.run_id = run_id;
  info.round = header.round;
  info.group_rank = place.group_rank;
  info.group_world_size = header.size;
  info.restart_count = header.restart_count;
  info.master_addr = header.master_addr;
  info.master_port = header.master_port;
  info.world_size = header.world_size;
  info.rank_base = place.rank_base;
  return info;
}

RoundShape shape_of(const C10dRoundHeader& header) {
  return RoundShape{header.round, header.size, header.host_first};
}

std::pair<C10dRoundHeader, C10dPlace> derive(const C10dRoundHeader& prev, const C10dPlace& place,
                                             const DerivedRound& derived) {
  C10dRoundHeader header = prev;
  header.round = prev.round + 1;
  header.derived = true;
  if (!derived.master_addr.empty()) {
    header.master_addr = derived.master_addr;
    header.master_port = derived.master_port;
  }
  header.size -= static_cast<int>(derived.lost.size());
  header.world_size -= lost_workers(derived);
  const DerivedPlace moved = derived_place(derived, place.group_rank, place.rank_base);
  C10dPlace next;
  next.group_rank = moved.group_rank;
  next.rank_base = moved.rank_base;
  return {header, next};
}

}  // namespace ddp::rdzv
