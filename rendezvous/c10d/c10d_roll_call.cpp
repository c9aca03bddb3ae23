// The caller's side of a c10d roll call: claim or join a generation, ring the members' lease hold
// keys (one MULTI_SET, by the winner only), and count the answers.

#include "rendezvous/c10d/c10d_roll_call.hpp"

#include <algorithm>

#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/store/store_lease.hpp"
#include "rendezvous/store/store_roll_call.hpp"

namespace ddp::rdzv {

asio::awaitable<std::optional<C10dRollCall>> c10d_call_roll(Store& store,
                                                            const std::string& call_key_prefix,
                                                            const C10dRoundHeader& header,
                                                            const std::string& caller,
                                                            int max_keys_per_request) {
  C10dRollCall call;
  call.key = c10d_keys::roll_call(header.round);
  // Every member holds a lease but the store host (host_first: the host is a member).
  call.expected = header.size - (header.host_first ? 1 : 0);
  if (call.expected < 1) co_return std::nullopt;
  Bytes seen;
  const bool called_before = co_await store.check(c10d_keys::one(call.key));
  if (called_before) seen = co_await store.get_existing(call.key);
  call.generation = roll_call_generation(seen) + 1;
  const Bytes mine = roll_call_value(call.generation, caller);
  // Lost: another caller claimed this generation after our read, so after our failure.
  const Bytes standing = co_await store.compare_set(call.key, seen, mine);
  if (standing != mine) co_return call;

  // In chunks: a large round's descriptors exceed the store's keys-per-request limit.
  const int chunk = std::max(max_keys_per_request, 1);
  const Bytes bell = to_bytes(call_key_prefix + "/" + call.key);
  for (int first = 1, last = 0; first <= header.size; first = last + 1) {
    last = first + std::min(chunk, header.size - first + 1) - 1;
    std::vector<std::string> node_keys;
    for (int i = first; i <= last; ++i) {
      node_keys.push_back(c10d_keys::node(header.round, i));
    }
    const bool described = co_await store.check(node_keys);
    if (!described) {
      // A member of a derived round that has not started there cannot be named: the call
      // stays unanswered and the verdict waits as without one.
      logger()->info("round {}: no roll call: a member has not written its descriptor yet",
                     header.round);
      co_return call;
    }
    const std::vector<Bytes> descs = co_await store.multi_get_existing(node_keys);
    std::vector<std::pair<std::string, Bytes>> bells;
    for (std::size_t i = 0; i < descs.size(); ++i) {
      const C10dNodeDesc desc = decode_node_desc(descs[i], node_keys[i]);
      if (!desc.is_host) {
        bells.emplace_back(lease_hold_key(c10d_keys::lease_base(desc.name)), bell);
      }
    }
    if (!bells.empty()) co_await store.multi_set(std::move(bells));
  }
  logger()->info("round {}: roll call {} rang {} lease holder(s)", header.round, call.generation,
                 call.expected);
  co_return call;
}

asio::awaitable<bool> c10d_roll_answered(Store& store, const C10dRollCall& call) {
  // The newest generation: a later caller's ring moves every holder's answer there.
  const std::int64_t newest = roll_call_generation(co_await store.get_existing(call.key));
  if (newest < call.generation) co_return false;
  co_return co_await store.add(roll_call_answers_key(call.key, newest), 0) >= call.expected;
}

}  // namespace ddp::rdzv
