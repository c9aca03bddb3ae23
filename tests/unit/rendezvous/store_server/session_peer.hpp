#pragma once
// Peer: a ServerSession with its RequestParser on a KeyTable, for wire-level tests without
// sockets: request bytes in, the immediate replies out, and the output sent later (wake-ups,
// watch events) collected apart.

#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store_server/server_session.hpp"
#include "rendezvous/wire/request_parser.hpp"
#include "tests/unit/rendezvous/wire_fixtures.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <utility>

namespace ddp::rdzv::test {

// Everything queued, copied into one buffer; empties the queue.
inline ByteVec take_all(OutputQueue& queue) {
  ByteVec out;
  queue.for_each_front(SIZE_MAX, SIZE_MAX, [&](std::span<const std::uint8_t> piece) {
    out.insert(out.end(), piece.begin(), piece.end());
  });
  queue.consume(queue.size());
  return out;
}

struct Peer {
  explicit Peer(KeyTable& table, wire::Limits limits = {.max_keys_per_query = 16})
      : parser(limits), session(table, [this](wire::Buffer bytes) {
          later.insert(later.end(), bytes.begin(), bytes.end());
        }, limits) {}

  // Feeds bytes; returns the replies to the requests they complete.
  ByteVec send(const ByteVec& bytes) {
    OutputQueue reply;
    std::span<const std::uint8_t> rest(bytes);
    while (!rest.empty()) {
      const auto result = parser.feed(rest);
      rest = rest.subspan(result.consumed);
      if (result.status == wire::ParseStatus::kNeedMore) break;
      REQUIRE(result.status == wire::ParseStatus::kOk);
      session.handle(parser.take_request(), reply);
    }
    return take_all(reply);
  }
  ByteVec take_later() { return std::exchange(later, {}); }

  wire::RequestParser parser;
  ByteVec later;
  ServerSession session;
};

}  // namespace ddp::rdzv::test
