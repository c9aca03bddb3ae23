// JSON forms of the etcd rendezvous documents. Every document carries "version".

#include "rendezvous/etcd/etcd_documents.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

namespace {

using nlohmann::json;

constexpr int kVersion = 1;

template <class Read>
auto read_document(std::string_view text, const std::string& what, Read read) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != kVersion) {
    throw IoError(fmt::format("etcd rendezvous: {} is not a version-{} document: '{}'", what,
                              kVersion, text.substr(0, 200)));
  }
  try {
    return read(doc);
  } catch (const json::exception& e) {
    throw IoError(fmt::format("etcd rendezvous: bad {}: {}", what, e.what()));
  }
}

}  // namespace

std::string encode(const NodeDesc& desc) {
  json doc{{"version", kVersion},
           {"name", desc.name},
           {"addr", desc.addr},
           {"lws", desc.local_world_size},
           {"master_addr", desc.master_addr},
           {"master_port", desc.master_port},
           {"link_port", desc.link_port}};
  if (!desc.addresses.empty()) doc["addresses"] = desc.addresses;
  if (desc.group_rank >= 0) doc["group_rank"] = desc.group_rank;
  if (desc.rank_hint >= 0) doc["rank_hint"] = desc.rank_hint;
  return doc.dump();
}

NodeDesc decode_node_desc(std::string_view text, const std::string& what) {
  return read_document(text, what, [](const json& doc) {
    NodeDesc d;
    d.name = doc.at("name").get<std::string>();
    d.addr = doc.at("addr").get<std::string>();
    d.local_world_size = doc.at("lws").get<int>();
    d.master_addr = doc.at("master_addr").get<std::string>();
    d.master_port = doc.at("master_port").get<std::uint16_t>();
    if (doc.contains("addresses")) d.addresses = doc.at("addresses").get<std::vector<std::string>>();
    d.link_port = doc.value("link_port", std::uint16_t{0});
    d.group_rank = doc.value("group_rank", -1);
    d.rank_hint = doc.value("rank_hint", -1);
    return d;
  });
}

std::string encode(const RoundHeader& h) {
  json runs = json::array();
  for (const MemberRun& run : h.runs) runs.push_back({run.first, run.count, run.lws});
  return json{{"version", kVersion},
              {"round", h.round},
              {"size", h.size},
              {"revision", h.revision},
              {"restart_count", h.restart_count},
              {"master_addr", h.master_addr},
              {"master_port", h.master_port},
              {"members", std::move(runs)},
              {"closer", h.closer},
              {"host", h.host},
              {"link_port", h.link_port}}
      .dump();
}

RoundHeader decode_round_header(std::string_view text, const std::string& what) {
  return read_document(text, what, [](const json& doc) {
    RoundHeader h;
    h.round = doc.at("round").get<int>();
    h.size = doc.at("size").get<int>();
    h.revision = doc.at("revision").get<std::int64_t>();
    h.restart_count = doc.at("restart_count").get<int>();
    h.master_addr = doc.at("master_addr").get<std::string>();
    h.master_port = doc.at("master_port").get<std::uint16_t>();
    for (const json& run : doc.at("members")) {
      h.runs.push_back({run.at(0).get<std::int64_t>(), run.at(1).get<int>(), run.at(2).get<int>()});
    }
    h.closer = doc.value("closer", std::string{});
    h.host = doc.value("host", std::string{});
    h.link_port = doc.value("link_port", std::uint16_t{0});
    return h;
  });
}

RoundHeader derive(const RoundHeader& prev, const DerivedRound& plan, std::string closer) {
  RoundHeader h = prev;
  h.round = prev.round + 1;
  h.derived = true;
  h.closer = std::move(closer);
  h.size -= static_cast<int>(plan.lost.size());
  if (!plan.master_addr.empty()) {
    h.master_addr = plan.master_addr;
    h.master_port = plan.master_port;
  }
  // The lost ranks ascend: walk the runs once, cutting each lost member out of its run.
  h.runs.clear();
  auto lost = plan.lost.begin();
  int rank = 0;
  for (const MemberRun& run : prev.runs) {
    MemberRun piece{run.first, 0, run.lws};
    for (int i = 0; i < run.count; ++i, ++rank) {
      if (lost != plan.lost.end() && lost->group_rank == rank) {
        ++lost;
        if (piece.count > 0) h.runs.push_back(piece);
        piece = MemberRun{run.first + i + 1, 0, run.lws};
      } else {
        ++piece.count;
      }
    }
    if (piece.count > 0) h.runs.push_back(piece);
  }
  return h;
}

RoundHeader late_header(int round, const Bytes& plan) {
  RoundHeader h;
  h.round = round;
  h.size = plan_size(plan);
  h.derived = true;
  return h;
}

RoundHeader header_for(int round, int restart_count, std::int64_t revision,
                       const std::vector<KeyValue>& members, std::string closer) {
  RoundHeader h;
  h.round = round;
  h.size = static_cast<int>(members.size());
  h.revision = revision;
  h.restart_count = restart_count;
  h.closer = std::move(closer);
  std::vector<std::pair<NodeDesc, std::int64_t>> order;  // (record, create revision)
  for (const KeyValue& kv : members) {
    order.emplace_back(decode_node_desc(kv.value, kv.key), kv.create_revision);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return rank_hint_order(a.first.rank_hint) < rank_hint_order(b.first.rank_hint);
  });
  const NodeDesc& first = order.front().first;
  h.master_addr = first.master_addr;
  h.master_port = first.master_port;
  h.host = first.name;
  h.link_port = first.link_port;
  for (const auto& [desc, revision] : order) {
    if (!h.runs.empty() && h.runs.back().lws == desc.local_world_size &&
        h.runs.back().first + h.runs.back().count == revision) {
      ++h.runs.back().count;
    } else {
      h.runs.push_back({revision, 1, desc.local_world_size});
    }
  }
  return h;
}

std::optional<int> group_rank_of(const RoundHeader& header, std::int64_t create_revision) {
  int before = 0;
  for (const MemberRun& run : header.runs) {
    if (create_revision >= run.first && create_revision < run.first + run.count) {
      return before + static_cast<int>(create_revision - run.first);
    }
    before += run.count;
  }
  return std::nullopt;
}

std::optional<std::int64_t> revision_of(const RoundHeader& header, int group_rank) {
  if (group_rank < 0) return std::nullopt;
  int before = 0;
  for (const MemberRun& run : header.runs) {
    if (group_rank < before + run.count) return run.first + (group_rank - before);
    before += run.count;
  }
  return std::nullopt;
}

int world_size(const RoundHeader& header) { return rank_base(header, header.size); }

int rank_base(const RoundHeader& header, int group_rank) {
  int base = 0;
  int left = group_rank;
  for (const MemberRun& run : header.runs) {
    const int n = std::min(run.count, left);
    base += n * run.lws;
    left -= n;
    if (left == 0) break;
  }
  return base;
}

RendezvousInfo info_for(const RoundHeader& header, int group_rank, const std::string& run_id) {
  RendezvousInfo info;
  info.run_id = run_id;
  info.round = header.round;
  info.group_rank = group_rank;
  info.group_world_size = header.size;
  info.rank_base = rank_base(header, group_rank);
  info.world_size = world_size(header);
  info.restart_count = header.restart_count;
  info.master_addr = header.master_addr;
  info.master_port = header.master_port;
  return info;
}

std::string failed_value(int restart_count, const std::string& node, const std::string& what) {
  std::string flat = what;
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  return fmt::format("{} {} {}", restart_count, node, flat);
}

int failed_restart_count(const std::string& value) {
  return parse_leading_number<int>(value).value_or(0);
}

std::string failed_detail(const std::string& value) {
  const std::size_t space = value.find(' ');
  return space == std::string::npos ? value : value.substr(space + 1);
}

}  // namespace ddp::rdzv::etcd
