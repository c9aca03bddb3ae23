#pragma once
// The roll call of a c10d failure verdict (store_roll_call.hpp over the members' store leases):
// a node whose worker failed with no loss in the round's log asks every lease holder of the
// round to answer, and the verdict ends as soon as all of them did, instead of waiting out
// connection_grace + verdict_margin. Concurrent callers share one generation: each reads the
// roll call key after its failure and claims the next generation with a compare_set; the winner
// rings, the others count on its generation (or a newer one), which began after their read. The
// store host holds no lease (it is the store) and is not called.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "rendezvous/c10d/c10d_assignment.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

struct C10dRollCall {
  std::string key;              // r<N>/roll
  std::int64_t generation = 0;  // the first generation that began after the caller's failure
  std::int64_t expected = 0;    // lease holders in the round
};

// Joins or starts a roll call of `header`'s round for the node `caller` (its unique name);
// `store` is the run's prefixed store and `call_key_prefix` the prefix its holders see
// ("/ddprun/<run_id>"); the winner reads descriptors and rings in requests of at most
// `max_keys_per_request` keys. nullopt when the round has nobody to call.
asio::awaitable<std::optional<C10dRollCall>> c10d_call_roll(Store& store,
                                                            const std::string& call_key_prefix,
                                                            const C10dRoundHeader& header,
                                                            const std::string& caller,
                                                            int max_keys_per_request);

// True once every expected holder answered the call's generation or a newer one (answers go to
// the newest generation only).
asio::awaitable<bool> c10d_roll_answered(Store& store, const C10dRollCall& call);

}  // namespace ddp::rdzv
