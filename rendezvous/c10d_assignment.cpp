// JSON forms of the c10d documents. A round is published as a header that every node reads and
// one small place per member: at 1,024 nodes a whole member list read by each of them was 1,024
// copies of a 30 KB document, parsed into about 100 fresh pages of memory per agent.

#include "rendezvous/c10d_assignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace {

using nlohmann::json;

// 2: the assignment says whether members[0] hosts the store. 3: header and places.
constexpr int kVersion = 3;

// A well-formed document of another version comes from an agent of another ddprun release (a
// setup mistake the user can fix: ConfigError); anything else is a bug (InternalError).
json parse_document(const Bytes& bytes, const std::string& what) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw InternalError(fmt::format("c10d rendezvous: {} is not a JSON document: '{}'", what,
                                    to_string(bytes).substr(0, 200)));
  }
  const auto version = doc.find("version");
  if (version != doc.end() && version->is_number_integer() && *version != kVersion) {
    throw ConfigError(fmt::format(
        "c10d rendezvous: the {} was written by another ddprun release (document version {}, this "
        "agent reads version {}): run the same ddprun on every node of the job",
        what, version->get<long long>(), kVersion));
  }
  if (version == doc.end() || *version != kVersion) {
    throw InternalError(fmt::format("c10d rendezvous: {} is not a version-{} document: '{}'",
                                    what, kVersion, to_string(bytes).substr(0, 200)));
  }
  return doc;
}

// Parses one of our documents and reads its fields with `read`; a missing or mistyped field is an
// InternalError naming `what`.
template <class Read>
auto read_document(const Bytes& bytes, const std::string& what, Read read) {
  const json doc = parse_document(bytes, what);
  try {
    return read(doc);
  } catch (const json::exception& e) {
    throw InternalError(fmt::format("c10d rendezvous: bad {}: {}", what, e.what()));
  }
}

Bytes dump(const json& doc) { return to_bytes(doc.dump()); }

}  // namespace

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
  if (desc.rank_hint >= 0) doc["rank_hint"] = desc.rank_hint;
  return dump(doc);
}

C10dNodeDesc decode_node_desc(const Bytes& bytes, const std::string& what) {
  return read_document(bytes, what, [](const json& doc) {
    C10dNodeDesc desc;
    desc.name = doc.at("name").get<std::string>();
    desc.addr = doc.at("addr").get<std::string>();
    desc.local_world_size = doc.at("lws").get<int>();
    desc.is_host = doc.at("host").get<bool>();
    desc.master_addr = doc.value("master_addr", std::string{});
    desc.master_port = doc.value("master_port", std::uint16_t{0});
    desc.rank_hint = doc.value("rank_hint", -1);
    return desc;
  });
}

Bytes encode(const C10dRoundHeader& header) {
  json doc = json::object();
  doc["version"] = kVersion;
  doc["round"] = header.round;
  doc["restart_count"] = header.restart_count;
  doc["master_addr"] = header.master_addr;
  doc["master_port"] = header.master_port;
  doc["host_first"] = header.host_first;
  doc["size"] = header.size;
  doc["world_size"] = header.world_size;
  return dump(doc);
}

C10dRoundHeader decode_round_header(const Bytes& bytes, const std::string& what) {
  return read_document(bytes, what, [](const json& doc) {
    C10dRoundHeader h;
    h.round = doc.at("round").get<int>();
    h.restart_count = doc.at("restart_count").get<int>();
    h.master_addr = doc.at("master_addr").get<std::string>();
    h.master_port = doc.at("master_port").get<std::uint16_t>();
    h.host_first = doc.at("host_first").get<bool>();
    h.size = doc.at("size").get<int>();
    h.world_size = doc.at("world_size").get<int>();
    return h;
  });
}

Bytes encode(const C10dPlace& place) {
  json doc = json::object();
  doc["version"] = kVersion;
  doc["group_rank"] = place.group_rank;
  doc["rank_base"] = place.rank_base;
  doc["neighbour_index"] = place.neighbour_index;
  doc["neighbour"] = place.neighbour;
  return dump(doc);
}

C10dPlace decode_place(const Bytes& bytes, const std::string& what) {
  return read_document(bytes, what, [](const json& doc) {
    C10dPlace p;
    p.group_rank = doc.at("group_rank").get<int>();
    p.rank_base = doc.at("rank_base").get<int>();
    p.neighbour_index = doc.at("neighbour_index").get<int>();
    p.neighbour = doc.at("neighbour").get<std::string>();
    return p;
  });
}

C10dAssignment assign_ranks(int round, int restart_count,
                            const std::vector<std::pair<int, C10dNodeDesc>>& nodes,
                            const std::pair<std::string, std::uint16_t>& fallback_master) {
  std::vector<std::pair<int, C10dNodeDesc>> order = nodes;
  // Hosts first (there is at most one in a healthy job), then hinted nodes by hint (an unhinted
  // node's -1 sorts last), then arrival order.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.is_host != b.second.is_host) return a.second.is_host;
    const auto hint = [](const C10dNodeDesc& d) {
      return d.rank_hint < 0 ? std::numeric_limits<int>::max() : d.rank_hint;
    };
    if (hint(a.second) != hint(b.second)) return hint(a.second) < hint(b.second);
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
    if (size > 1) {
      const C10dMember& next = a.members[static_cast<std::size_t>((g + 1) % size)];
      p.neighbour_index = next.join_index;
      p.neighbour = next.name;
    }
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

}  // namespace ddp::rdzv
