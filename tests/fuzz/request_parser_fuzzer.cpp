// libFuzzer target for the store's request parser and the server session behind it. Properties:
// the parser never reads past its input or consumes more than it was given, parsing in one piece
// and in input-chosen chunks yields the same requests (or the same error), and every request it
// accepts is served by a ServerSession without crashing. Limits are small so that a length field
// cannot make the fuzzer allocate much.

#include "ddp/error.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store_server/server_session.hpp"
#include "rendezvous/wire/request_parser.hpp"

#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

namespace {

using ddp::rdzv::wire::ParseStatus;
using ddp::rdzv::wire::Request;

constexpr ddp::rdzv::wire::Limits kLimits{64, 1024, 8};

struct Outcome {
  std::vector<Request> requests;
  bool bad = false;
  std::string error;
};

bool same(const Request& a, const Request& b) {
  return a.command == b.command && a.keys == b.keys && a.values == b.values &&
         a.delta == b.delta && a.word == b.word;
}

Outcome parse(std::span<const std::uint8_t> data, std::size_t chunk) {
  ddp::rdzv::wire::RequestParser parser(kLimits);
  Outcome out;
  for (std::size_t at = 0; at < data.size() && !out.bad; at += chunk) {
    auto piece = data.subspan(at, std::min(chunk, data.size() - at));
    while (!piece.empty()) {
      const auto result = parser.feed(piece);
      if (result.consumed > piece.size()) std::abort();
      piece = piece.subspan(result.consumed);
      if (result.status == ParseStatus::kNeedMore) {
        if (!piece.empty()) std::abort();  // kNeedMore consumes everything
        break;
      }
      if (result.status == ParseStatus::kBad) {
        out.bad = true;
        out.error = parser.error();
        break;
      }
      out.requests.push_back(parser.take_request());
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 16;
  std::span<const std::uint8_t> input(data + 1, size - 1);

  const Outcome whole = parse(input, input.size() + 1);
  const Outcome pieces = parse(input, chunk);
  if (whole.bad != pieces.bad || whole.error != pieces.error ||
      whole.requests.size() != pieces.requests.size()) {
    std::abort();
  }
  for (std::size_t i = 0; i < whole.requests.size(); ++i) {
    if (!same(whole.requests[i], pieces.requests[i])) std::abort();
  }

  ddp::rdzv::KeyTable table;
  std::size_t later_bytes = 0;
  ddp::rdzv::ServerSession session(
      table, [&](ddp::rdzv::wire::Buffer bytes) { later_bytes += bytes.size(); }, kLimits);
  ddp::rdzv::ServerSession writer(table, [](ddp::rdzv::wire::Buffer) {}, kLimits);
  for (auto& request : whole.requests) {
    ddp::rdzv::OutputQueue reply;
    try {
      // Alternate sessions so that waits and watches of one are completed by the other.
      (request.keys.size() % 2 == 0 ? session : writer).handle(std::move(request), reply);
    } catch (const ddp::Error&) {
      break;  // the server closes the connection here
    }
  }
  return 0;
}
