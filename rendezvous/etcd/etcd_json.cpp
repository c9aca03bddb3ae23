// JSON forms of the etcd v3 gateway's messages (grpc-gateway's mapping of etcdserverpb): int64
// fields travel as strings and are read from either form; a field at its zero value is absent, so
// every read has a default.

#include "rendezvous/etcd/etcd_json.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

namespace {

using nlohmann::json;

std::int64_t int_field(const json& doc, const char* name) {
  const auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_string()) return std::stoll(it->get<std::string>());
  throw json::type_error::create(302, fmt::format("{} is not an integer", name), &doc);
}

bool bool_field(const json& doc, const char* name) {
  const auto it = doc.find(name);
  return it != doc.end() && it->is_boolean() && it->get<bool>();
}

std::string bytes_field(const json& doc, const char* name) {
  const auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return {};
  return base64_decode(it->get<std::string>());
}

KeyValue read_kv(const json& doc) {
  return KeyValue{bytes_field(doc, "key"), bytes_field(doc, "value"),
                  int_field(doc, "create_revision"), int_field(doc, "mod_revision"),
                  int_field(doc, "lease")};
}

std::int64_t header_revision(const json& doc) {
  const auto it = doc.find("header");
  return it == doc.end() ? 0 : int_field(*it, "revision");
}

RangeResponse read_range(const json& doc) {
  RangeResponse r{header_revision(doc), int_field(doc, "count"), {}};
  if (const auto it = doc.find("kvs"); it != doc.end()) {
    for (const json& kv : *it) r.kvs.push_back(read_kv(kv));
  }
  return r;
}

// An int64 field, as a string, when it is not zero.
void set_int(json& doc, const char* name, std::int64_t value) {
  if (value != 0) doc[name] = std::to_string(value);
}

json range_json(const RangeRequest& q) {
  json doc = {{"key", base64_encode(q.key)}};
  if (!q.range_end.empty()) doc["range_end"] = base64_encode(q.range_end);
  set_int(doc, "limit", q.limit);
  set_int(doc, "revision", q.revision);
  set_int(doc, "max_create_revision", q.max_create_revision);
  if (q.count_only) doc["count_only"] = true;
  if (q.sort_by_create) {
    doc["sort_order"] = "ASCEND";
    doc["sort_target"] = "CREATE";
  }
  return doc;
}

json put_json(const PutRequest& p) {
  json doc = {{"key", base64_encode(p.key)}, {"value", base64_encode(p.value)}};
  set_int(doc, "lease", p.lease);
  return doc;
}

// Parses a response and reads it with `read`; any malformed part is an IoError naming `op` (a
// member that answers nonsense is as good as gone).
template <class Read>
auto read_response(std::string_view text, std::string_view op, Read read) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    throw IoError(fmt::format("etcd {}: the response is not JSON: '{}'", op, text.substr(0, 200)));
  }
  try {
    return read(doc);
  } catch (const std::exception& e) {
    throw IoError(
        fmt::format("etcd {}: bad response ({}): '{}'", op, e.what(), text.substr(0, 200)));
  }
}

}  // namespace

// OpenSSL's base64 (the client links it for TLS): standard alphabet, padded, no line breaks.
std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '\0');
  ::EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),  // (and a NUL after it)
                    reinterpret_cast<const unsigned char*>(bytes.data()),
                    static_cast<int>(bytes.size()));
  return out;
}

std::string base64_decode(std::string_view text) {
  std::string out(text.size() / 4 * 3 + 1, '\0');
  const int n = ::EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
  if (n < 0) throw IoError(fmt::format("etcd: '{}' is not base64", text.substr(0, 80)));
  // EVP_DecodeBlock counts the padding as zero bytes.
  const std::size_t padding = text.size() - text.find_last_not_of('=') - 1;
  out.resize(static_cast<std::size_t>(n) - std::min<std::size_t>(padding, 2));
  return out;
}

std::string prefix_end(std::string prefix) {
  // Our prefixes end in '/', never in 0xff: the last byte + 1 is the whole range's end.
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

std::string range_body(const RangeRequest& request) { return range_json(request).dump(); }
std::string put_body(const PutRequest& request) { return put_json(request).dump(); }

RangeRequest one_key(std::string key) {
  RangeRequest r;
  r.key = std::move(key);
  return r;
}

RangeRequest prefix_count(const std::string& prefix) {
  RangeRequest r = one_key(prefix);
  r.range_end = prefix_end(prefix);
  r.count_only = true;
  return r;
}

std::string txn_body(const TxnRequest& request) {
  // Compare::Target's names on the wire, and the field that holds what it is compared with.
  constexpr std::array<std::pair<const char*, const char*>, 3> kTargets = {
      {{"CREATE", "create_revision"}, {"MOD", "mod_revision"}, {"VALUE", "value"}}};
  json compare = json::array();
  for (const Compare& c : request.compare) {
    const auto [target, field] = kTargets[static_cast<std::size_t>(c.target)];
    compare.push_back({{"key", base64_encode(c.key)}, {"result", "EQUAL"}, {"target", target}});
    compare.back()[field] =
        c.target == Compare::Target::kValue ? base64_encode(c.value) : std::to_string(c.revision);
  }
  json success = json::array();
  for (const PutRequest& p : request.success) success.push_back({{"request_put", put_json(p)}});
  for (const RangeRequest& r : request.success_reads) {
    success.push_back({{"request_range", range_json(r)}});
  }
  for (const std::string& key : request.success_deletes) {
    success.push_back({{"request_delete_range", {{"key", base64_encode(key)}}}});
  }
  json failure = json::array();
  for (const RangeRequest& r : request.failure) {
    failure.push_back({{"request_range", range_json(r)}});
  }
  return json{{"compare", compare}, {"success", success}, {"failure", failure}}.dump();
}

std::string lease_grant_body(std::int64_t ttl_seconds) {
  return json{{"TTL", std::to_string(ttl_seconds)}}.dump();
}

std::string lease_id_body(std::int64_t id) { return json{{"ID", std::to_string(id)}}.dump(); }

std::string authenticate_body(const std::string& user, const std::string& password) {
  return json{{"name", user}, {"password", password}}.dump();
}

std::string decode_auth_token(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) {
    std::string token = doc.value("token", std::string{});
    if (token.empty()) throw std::runtime_error("no token");
    return token;
  });
}

std::string watch_create_body(const std::string& key, const std::string& range_end,
                              std::int64_t start_revision, bool prev_kv) {
  RangeRequest watched = one_key(key);
  watched.range_end = range_end;
  json create = range_json(watched);
  set_int(create, "start_revision", start_revision);
  if (prev_kv) create["prev_kv"] = true;
  return json{{"create_request", std::move(create)}}.dump();
}

RangeResponse decode_range(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) { return read_range(doc); });
}

std::int64_t decode_put(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) { return header_revision(doc); });
}

TxnResponse decode_txn(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) {
    TxnResponse t{bool_field(doc, "succeeded"), header_revision(doc), {}};
    if (const auto it = doc.find("responses"); it != doc.end()) {
      for (const json& r : *it) {
        if (const auto range = r.find("response_range"); range != r.end()) {
          t.ranges.push_back(read_range(*range));
        }
      }
    }
    return t;
  });
}

LeaseGrant decode_lease_grant(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) {
    const std::string error = doc.value("error", std::string{});
    if (!error.empty()) throw std::runtime_error(error);
    LeaseGrant g{int_field(doc, "ID"), int_field(doc, "TTL")};
    if (g.id == 0) throw std::runtime_error("no lease ID");
    return g;
  });
}

std::int64_t decode_lease_keepalive(std::string_view text, std::string_view op) {
  // A stream of one message: {"result": {"ID": ..., "TTL": ...}}.
  return read_response(text, op,
                       [](const json& doc) { return int_field(doc.at("result"), "TTL"); });
}

WatchResponse decode_watch(std::string_view text, std::string_view op) {
  return read_response(text, op, [](const json& doc) {
    const auto result = doc.find("result");
    if (result == doc.end()) {
      const auto error = doc.find("error");
      throw std::runtime_error(error != doc.end() ? error->dump() : "no result");
    }
    const json& r = *result;
    WatchResponse w{header_revision(r),           bool_field(r, "created"),
                    bool_field(r, "canceled"),    int_field(r, "compact_revision"),
                    r.value("cancel_reason", ""), {}};
    if (const auto it = r.find("events"); it != r.end()) {
      for (const json& e : *it) {
        WatchEvent event{e.value("type", "") == "DELETE", read_kv(e.at("kv")), std::nullopt};
        if (const auto prev = e.find("prev_kv"); prev != e.end()) event.prev_kv = read_kv(*prev);
        w.events.push_back(std::move(event));
      }
    }
    return w;
  });
}

std::optional<GatewayError> decode_error(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  // Unary errors: {"error": "...", "code": N, "message": "..."}. Errors inside a stream (a
  // keep-alive, a watch): {"error": {"grpc_code": N, "http_code": N, "message": "..."}}.
  const json* body = &doc;
  if (const auto nested = doc.find("error"); nested != doc.end() && nested->is_object()) {
    body = &*nested;
  } else if (!doc.contains("message") && !doc.contains("error")) {
    return std::nullopt;
  }
  GatewayError e;
  for (const char* code : {"code", "grpc_code"}) {
    if (const auto it = body->find(code); it != body->end() && it->is_number_integer()) {
      e.code = it->get<int>();
    }
  }
  for (const char* message : {"message", "error"}) {  // the first one there
    if (const auto it = body->find(message);
        e.message.empty() && it != body->end() && it->is_string()) {
      e.message = it->get<std::string>();
    }
  }
  if (e.message.empty()) e.message = std::string(text.substr(0, 200));
  return e;
}

bool is_retryable(const GatewayError& error) {
  // gRPC codes that another member (or a later try) cannot change: the request itself is wrong,
  // or it names something that does not exist: invalid argument (3), not found (5: a lease that
  // expired), already exists (6), permission denied (7), failed precondition (9), out of range
  // (11: a compacted revision), unimplemented (12), unauthenticated (16). Everything else
  // (unavailable, deadline exceeded, no leader, leader changed, too many requests, unknown) is
  // worth the next member.
  constexpr std::array kFinal = {3, 5, 6, 7, 9, 11, 12, 16};
  return std::ranges::find(kFinal, error.code) == kFinal.end();
}

}  // namespace ddp::rdzv::etcd
