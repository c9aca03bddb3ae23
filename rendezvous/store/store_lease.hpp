#pragma once
// Store leases: what a client tells the store to do when its connection dies. The client parks a
// WAIT on the lease's hold key (set only to ring a roll call) over a connection of its own; when
// that wait goes away without waking (the connection closed) and none is parked there again
// within the lease's grace, the store appends the lease's value to the lease's key. Key names and
// the lease document only; the store side is KeyLeases (key_leases.hpp). PyTorch clients never
// use these keys, so to them the store is unchanged.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

struct Lease {
  std::chrono::milliseconds grace{300};  // how long a dropped wait may take to be parked again
  std::string append_key;                // where the value goes when the lease expires
  std::string value;  // appended as is, with "{after_ms}" replaced by drop-to-expiry milliseconds
};

inline constexpr std::string_view kLeaseHoldSuffix = "/lease.held";
inline constexpr std::string_view kLeaseAfterMs = "{after_ms}";

// The lease of `base` (any key path): its document at "<base>/lease", its hold key (waited on;
// set only to ring a roll call, store_roll_call.hpp) at "<base>/lease.held".
inline std::string lease_key(const std::string& base) { return base + "/lease"; }
inline std::string lease_hold_key(const std::string& base) {
  return base + std::string(kLeaseHoldSuffix);
}
// The base of a hold key, or nullopt when `key` is not one.
std::optional<std::string> lease_base_of(const std::string& key);

Bytes encode(const Lease& lease);
// nullopt when the bytes are not a lease document (the store then ignores the lease).
std::optional<Lease> decode_lease(const Bytes& bytes);

// The value to append: lease.value with "{after_ms}" replaced.
Bytes expired_value(const Lease& lease, std::chrono::milliseconds after);

}  // namespace ddp::rdzv
