#pragma once
// Request: one decoded TCPStore request, the same for both dialects (the parser maps the command
// byte through protocol.hpp).

#include "rendezvous/wire/protocol.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::rdzv::wire {

struct Request {
  Command command = Command::kGetNumKeys;
  // SET, COMPARE_SET, GET, ADD, WATCH_KEY, DELETE_KEY, APPEND, QUEUE_PUSH, QUEUE_POP, QUEUE_LEN,
  // BARRIER: one key. CHECK, WAIT, MULTI_GET, MULTI_SET: every key of the query, in order.
  std::vector<std::string> keys;
  // SET, APPEND, QUEUE_PUSH: {value}. COMPARE_SET: {expected, desired}. MULTI_SET: one value
  // per key.
  std::vector<std::vector<std::uint8_t>> values;
  std::int64_t delta = 0;    // ADD: the delta; BARRIER: the world size
  std::uint32_t word = 0;    // VALIDATE: the magic; PING: the nonce
};

}  // namespace ddp::rdzv::wire
