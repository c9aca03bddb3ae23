#pragma once
// The etcd v3 JSON gateway's documents (etcd 3.4, paths under /v3/): request bodies and decoded
// responses. On the wire keys and values are base64, int64 fields are decimal strings, and fields
// with zero values are omitted. Pure functions: no sockets, no Asio.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::rdzv::etcd {

std::string base64_encode(std::string_view bytes);
// Throws IoError on text that is not padded base64.
std::string base64_decode(std::string_view text);

// The end of the key range that holds every key starting with `prefix` (its last byte + 1).
std::string prefix_end(std::string prefix);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;
};

struct RangeRequest {
  std::string key;
  std::string range_end;  // "" for one key; prefix_end(key) for a prefix
  std::int64_t limit = 0;
  std::int64_t revision = 0;             // 0: the latest; else a read at that past revision
  std::int64_t max_create_revision = 0;  // 0: no bound
  bool count_only = false;
  bool sort_by_create = false;  // ascending create revision
};

RangeRequest one_key(std::string key);                 // the key's value
RangeRequest prefix_count(const std::string& prefix);  // how many keys start with `prefix`

struct RangeResponse {
  std::int64_t revision = 0;  // the store's revision at the read
  std::int64_t count = 0;
  std::vector<KeyValue> kvs;
};

struct PutRequest {
  std::string key;
  std::string value;
  std::int64_t lease = 0;
};

// One EQUAL comparison of a transaction.
struct Compare {
  enum class Target { kCreate, kMod, kValue };
  std::string key;
  Target target = Target::kCreate;
  std::int64_t revision = 0;  // kCreate, kMod (0 with kCreate: "the key does not exist")
  std::string value;          // kValue
};

// If every compare holds (no compares: always), the puts run, then the success reads, which
// see the puts, then the success deletes (of one key each); otherwise the failure reads run. All
// in one revision.
struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<PutRequest> success;
  std::vector<RangeRequest> success_reads;
  std::vector<std::string> success_deletes;
  std::vector<RangeRequest> failure;
};

struct TxnResponse {
  bool succeeded = false;
  std::int64_t revision = 0;          // the txn's puts' revision when it wrote
  std::vector<RangeResponse> ranges;  // the reads of the branch that ran, in order
};

struct LeaseGrant {
  std::int64_t id = 0;
  std::int64_t ttl = 0;  // seconds
};

struct WatchEvent {
  bool is_delete = false;
  KeyValue kv;
  std::optional<KeyValue> prev_kv;  // when the watch asked for it
};

struct WatchResponse {
  std::int64_t revision = 0;
  bool created = false;
  bool canceled = false;
  std::int64_t compact_revision = 0;
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};

// Request bodies.
std::string range_body(const RangeRequest& request);
std::string put_body(const PutRequest& request);
std::string txn_body(const TxnRequest& request);
std::string lease_grant_body(std::int64_t ttl_seconds);
std::string lease_id_body(std::int64_t id);  // keepalive and revoke
std::string authenticate_body(const std::string& user, const std::string& password);
std::string watch_create_body(const std::string& key, const std::string& range_end,
                              std::int64_t start_revision, bool prev_kv);

// Response decoders. Each throws IoError naming `op` when the text is not that response.
RangeResponse decode_range(std::string_view text, std::string_view op);
std::int64_t decode_put(std::string_view text, std::string_view op);  // the put's revision
TxnResponse decode_txn(std::string_view text, std::string_view op);
LeaseGrant decode_lease_grant(std::string_view text, std::string_view op);
// The lease's remaining TTL; 0 when etcd no longer knows the lease (it expired or was revoked).
std::int64_t decode_lease_keepalive(std::string_view text, std::string_view op);
WatchResponse decode_watch(std::string_view text, std::string_view op);
// The token of /v3/auth/authenticate's answer.
std::string decode_auth_token(std::string_view text, std::string_view op);

// The gateway's error document ({"error": ..., "code": N, "message": ...}, or inside a stream
// {"error": {"grpc_code": N, "message": ...}}): its code and message, or nullopt when `text` is
// not one.
struct GatewayError {
  int code = 0;  // gRPC status code (14: unavailable)
  std::string message;
};
std::optional<GatewayError> decode_error(std::string_view text);

// False for errors no other member can change (a bad request, a lease not found); true for the
// rest (no leader, leader changed, timeouts, unavailable, too many requests).
bool is_retryable(const GatewayError& error);

}  // namespace ddp::rdzv::etcd
