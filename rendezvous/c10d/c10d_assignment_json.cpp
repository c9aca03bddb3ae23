// JSON forms of the c10d documents (encode / decode_* of c10d_assignment.hpp). The header and
// the place map field for field (NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE); the node descriptor names
// local_world_size "lws" and leaves empty fields out, so it is written by hand.

#include "rendezvous/c10d/c10d_assignment.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace {

using nlohmann::json;

// 2: the assignment says whether members[0] hosts the store. 3: header and places. 4: a join is
// one MULTI_SET and the change log exists from its first line on (a version-3 agent would wait on
// it forever), so the two never mix. 5: rounds derived from the one before
// (engine/derived_round.hpp). 6: a place no longer names its ring neighbour.
constexpr int kVersion = 6;

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

// Every field is required on reading (a missing one throws json::exception: read_document
// makes it an InternalError). nlohmann's objects keep their keys sorted, so "version" added after
// the fields lands where it always did.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(C10dRoundHeader, round, restart_count, master_addr,
                                   master_port, host_first, size, world_size, derived)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(C10dPlace, group_rank, rank_base)

namespace {

template <class Document>
Bytes encode_fields(const Document& document) {
  json doc = document;
  doc["version"] = kVersion;
  return dump(doc);
}

template <class Document>
Document decode_fields(const Bytes& bytes, const std::string& what) {
  return read_document(bytes, what, [](const json& doc) { return doc.get<Document>(); });
}

}  // namespace

Bytes encode(const C10dRoundHeader& header) { return encode_fields(header); }

C10dRoundHeader decode_round_header(const Bytes& bytes, const std::string& what) {
  return decode_fields<C10dRoundHeader>(bytes, what);
}

Bytes encode(const C10dPlace& place) { return encode_fields(place); }

C10dPlace decode_place(const Bytes& bytes, const std::string& what) {
  return decode_fields<C10dPlace>(bytes, what);
}

}  // namespace ddp::rdzv
