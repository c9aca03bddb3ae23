#pragma once
// Store roll calls: how a node learns that every lease holder of a group is alive right now,
// without any request while nothing fails. A caller claims the next generation of a roll call key
// ("<generation> <caller>", compare_set) and rings the members' doorbells: it sets their lease
// hold keys (store_lease.hpp), which nobody else sets, to the roll call key's full name. Each
// holder's parked WAIT wakes; the holder reads its bell, deletes it, re-parks, and answers the
// newest generation by adding one to "<roll call key>/<generation>" (answer_roll_call). The
// caller compares that count with the members it expects. A dead or cut-off holder cannot
// answer; its loss still arrives through its lease. Key names and values only; the c10d
// rendezvous rings (c10d_roll_call.hpp), LeaseHolder answers.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

// The roll call key's value for `generation`, claimed by `caller` (a unique node name, so that
// a compare_set tells its winner apart).
Bytes roll_call_value(std::int64_t generation, const std::string& caller);
// The generation a roll call key's value names; 0 for none (empty or not a roll call value).
std::int64_t roll_call_generation(const Bytes& value);
// The counter of the answers to `generation` of the roll call at `call_key`.
std::string roll_call_answers_key(const std::string& call_key, std::int64_t generation);

// A holder answers the bell it read from its hold key (the roll call key's full name): adds one
// to the newest generation's answers unless that is `answered` (a bell rung again for the
// generation it already answered). Returns the answers key it counted in or skipped.
asio::awaitable<std::string> answer_roll_call(Store& store, const Bytes& bell,
                                              const std::string& answered);

}  // namespace ddp::rdzv
