// JSON forms of the c10d documents. Members are compact arrays [name, join_index, lws] because
// every member reads the whole assignment: at 1,024 nodes it is read 1,024 times.

#include "rendezvous/c10d_assignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace {

using nlohmann::json;

constexpr int kVersion = 2;  // 2: the assignment says whether members[0] hosts the store

json parse_document(const Bytes& bytes, const std::string& what) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != kVersion) {
    throw InternalError(fmt::format("c10d rendezvous: {} is not a version-{} document: '{}'",
                                    what, kVersion, to_string(bytes).substr(0, 200)));
  }
  return doc;
}

Bytes dump(const json& doc) { return to_bytes(doc.dump()); }

}  // namespace

std::optional<int> C10dAssignment::group_rank_of(int join_index) const {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].join_index == join_index) return static_cast<int>(i);
  }
  return std::nullopt;
}

Bytes encode(const C10dNodeDesc& desc) {
  json doc = json::object();
  doc["version"] = kVersion;
  doc["name"] = desc.name;
  doc["addr"] = desc.addr;
  doc["lws"] = desc.local_world_size;
  doc["host"] = desc.is_host;
  if (!desc.master_addr.empty()) {
    doc["master_addr"] = desc.master_addr;
    doc["master_port"] = desc.master_port;
  }
  return dump(doc);
}

C10dNodeDesc decode_node_desc(const Bytes& bytes, const std::string& what) {
  const json doc = parse_document(bytes, what);
  try {
    C10dNodeDesc desc;
    desc.name = doc.at("name").get<std::string>();
    desc.addr = doc.at("addr").get<std::string>();
    desc.local_world_size = doc.at("lws").get<int>();
    desc.is_host = doc.at("host").get<bool>();
    desc.master_addr = doc.value("master_addr", std::string{});
    desc.master_port = doc.value("master_port", std::uint16_t{0});
    return desc;
  } catch (const json::exception& e) {
    throw InternalError(fmt::format("c10d rendezvous: bad {}: {}", what, e.what()));
  }
}

Bytes encode(const C10dAssignment& assignment) {
  json members = json::array();
  for (const C10dMember& m : assignment.members) {
    members.push_back(json::array({m.name, m.join_index, m.local_world_size}));
  }
  json doc = json::object();
  doc["version"] = kVersion;
  doc["round"] = assignment.round;
  doc["restart_count"] = assignment.restart_count;
  doc["master_addr"] = assignment.master_addr;
  doc["master_port"] = assignment.master_port;
  doc["host_first"] = assignment.host_first;
  doc["members"] = std::move(members);
  return dump(doc);
}

C10dAssignment decode_assignment(const Bytes& bytes, const std::string& what) {
  const json doc = parse_document(bytes, what);
  try {
    C10dAssignment a;
    a.round = doc.at("round").get<int>();
    a.restart_count = doc.at("restart_count").get<int>();
    a.master_addr = doc.at("master_addr").get<std::string>();
    a.master_port = doc.at("master_port").get<std::uint16_t>();
    a.host_first = doc.at("host_first").get<bool>();
    for (const json& m : doc.at("members")) {
      a.members.push_back({m.at(0).get<std::string>(), m.at(1).get<int>(), m.at(2).get<int>()});
    }
    return a;
  } catch (const json::exception& e) {
    throw InternalError(fmt::format("c10d rendezvous: bad {}: {}", what, e.what()));
  }
}

C10dAssignment assign_ranks(int round, int restart_count,
                            const std::vector<std::pair<int, C10dNodeDesc>>& nodes,
                            const std::pair<std::string, std::uint16_t>& fallback_master) {
  std::vector<std::pair<int, C10dNodeDesc>> order = nodes;
  // Hosts first (there is at most one in a healthy job), then arrival order.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.is_host != b.second.is_host) return a.second.is_host;
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

RendezvousInfo info_for(const C10dAssignment& a, int group_rank, const std::string& run_id) {
  RendezvousInfo info;
  info.run_id = run_id;
  info.round = a.round;
  info.group_rank = group_rank;
  info.group_world_size = static_cast<int>(a.members.size());
  info.restart_count = a.restart_count;
  info.master_addr = a.master_addr;
  info.master_port = a.master_port;
  info.world_size = 0;
  for (std::size_t i = 0; i < a.members.size(); ++i) {
    if (static_cast<int>(i) == group_rank) info.rank_base = info.world_size;
    info.world_size += a.members[i].local_world_size;
    info.node_names.push_back(a.members[i].name);
  }
  return info;
}

}  // namespace ddp::rdzv
