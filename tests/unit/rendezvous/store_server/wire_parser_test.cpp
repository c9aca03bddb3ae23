// RequestParser against the spec's bytes: the captured 1.13 traffic (§5.9), the 2.x numbering
// with VALIDATE, dialect detection (§5.8), arbitrary splits, limits and bad input.

#include "rendezvous/wire/request_parser.hpp"
#include "tests/unit/rendezvous/wire_fixtures.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <span>

using namespace ddp::rdzv::wire;
using namespace ddp::rdzv::test;

namespace {

// Parses every request in `bytes` fed in one piece.
std::vector<Request> parse_all(RequestParser& parser, const ByteVec& bytes) {
  std::vector<Request> out;
  std::span<const std::uint8_t> rest(bytes);
  while (!rest.empty()) {
    const auto result = parser.feed(rest);
    rest = rest.subspan(result.consumed);
    if (result.status == ParseStatus::kNeedMore) break;
    REQUIRE(result.status == ParseStatus::kOk);
    out.push_back(parser.take_request());
  }
  return out;
}

std::vector<Request> parse_all(const ByteVec& bytes) {
  RequestParser parser;
  auto out = parse_all(parser, bytes);
  REQUIRE(parser.is_idle());
  return out;
}

// Feeds `bytes` in chunks of `chunk` bytes.
std::vector<Request> parse_chunked(const ByteVec& bytes, std::size_t chunk) {
  RequestParser parser;
  std::vector<Request> out;
  for (std::size_t at = 0; at < bytes.size(); at += chunk) {
    std::span<const std::uint8_t> piece(bytes.data() + at, std::min(chunk, bytes.size() - at));
    while (!piece.empty()) {
      const auto result = parser.feed(piece);
      piece = piece.subspan(result.consumed);
      if (result.status == ParseStatus::kNeedMore) break;
      REQUIRE(result.status == ParseStatus::kOk);
      out.push_back(parser.take_request());
    }
  }
  REQUIRE(parser.is_idle());
  return out;
}

std::string text(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// §5.9, client to server, in order.
const ByteVec kCaptured113 = hex(
    "00 0300000000000000 2f6b31 0200000000000000 7631"        // SET /k1 = v1
    "05 0100000000000000 0300000000000000 2f6b31"             // WAIT [/k1]
    "02 0300000000000000 2f6b31"                              // GET /k1
    "03 0400000000000000 2f636e74 0500000000000000"           // ADD /cnt +5
    "03 0400000000000000 2f636e74 feffffffffffffff"           // ADD /cnt -2
    "01 0300000000000000 2f6b31 0200000000000000 7631 0200000000000000 7632"  // CAS v1->v2
    "01 0500000000000000 2f6e65776b 0000000000000000 0100000000000000 78"     // CAS ''->x
    "01 0800000000000000 2f6d697373696e67 0300000000000000 657870 0100000000000000 79"
    "06"                                                      // GETNUMKEYS
    "05 0200000000000000 0300000000000000 2f6b31 0400000000000000 2f636e74"
    "08 0300000000000000 2f6b31"                              // DELETE_KEY /k1
    "04 0100000000000000 0300000000000000 2f636b"             // CHECK [/ck]
    "07 0300000000000000 2f776b");                            // WATCH_KEY /wk

void check_captured(const std::vector<Request>& r) {
  REQUIRE(r.size() == 13);
  CHECK(r[0].command == Command::kSet);
  CHECK(r[0].keys == std::vector<std::string>{"/k1"});
  CHECK(text(r[0].values.at(0)) == "v1");
  CHECK(r[1].command == Command::kWait);
  CHECK(r[1].keys == std::vector<std::string>{"/k1"});
  CHECK(r[2].command == Command::kGet);
  CHECK(r[3].command == Command::kAdd);
  CHECK(r[3].keys[0] == "/cnt");
  CHECK(r[3].delta == 5);
  CHECK(r[4].delta == -2);
  CHECK(r[5].command == Command::kCompareSet);
  CHECK(text(r[5].values.at(0)) == "v1");
  CHECK(text(r[5].values.at(1)) == "v2");
  CHECK(r[6].keys[0] == "/newk");
  CHECK(r[6].values.at(0).empty());
  CHECK(text(r[6].values.at(1)) == "x");
  CHECK(r[7].keys[0] == "/missing");
  CHECK(r[8].command == Command::kGetNumKeys);
  CHECK(r[9].command == Command::kWait);
  CHECK(r[9].keys == std::vector<std::string>{"/k1", "/cnt"});
  CHECK(r[10].command == Command::kDeleteKey);
  CHECK(r[11].command == Command::kCheck);
  CHECK(r[11].keys == std::vector<std::string>{"/ck"});
  CHECK(r[12].command == Command::kWatchKey);
  CHECK(r[12].keys[0] == "/wk");
}

}  // namespace

TEST_CASE("captured 1.13 traffic parses request by request") {
  RequestParser parser;
  check_captured(parse_all(parser, kCaptured113));
  REQUIRE(parser.dialect() == Dialect::kTorch113);
}

TEST_CASE("captured 1.13 traffic parses the same split at every chunk size") {
  for (std::size_t chunk : {1, 2, 3, 5, 7, 8, 9, 13, 64}) {
    INFO("chunk " << chunk);
    check_captured(parse_chunked(kCaptured113, chunk));
  }
}

TEST_CASE("a lone GETNUMKEYS byte is a complete 1.13 request") {
  RequestParser parser;
  const ByteVec one = hex("06");
  const auto result = parser.feed(one);
  REQUIRE(result.status == ParseStatus::kOk);
  REQUIRE(result.consumed == 1);
  REQUIRE(parser.dialect() == Dialect::kTorch113);
  REQUIRE(parser.take_request().command == Command::kGetNumKeys);
}

TEST_CASE("a leading zero byte waits for four more before deciding the dialect") {
  RequestParser parser;
  const ByteVec first = hex("00 CE F7");
  REQUIRE(parser.feed(first).status == ParseStatus::kNeedMore);
  REQUIRE_FALSE(parser.dialect());
  const ByteVec second = hex("85 3C");
  REQUIRE(parser.feed(second).status == ParseStatus::kOk);
  REQUIRE(parser.dialect() == Dialect::kTorch2);
  const auto request = parser.take_request();
  CHECK(request.command == Command::kValidate);
  CHECK(request.word == kValidateMagic);
}

TEST_CASE("a 1.13 SET starting with zero bytes is not mistaken for VALIDATE") {
  const auto requests = parse_chunked(cat({byte(0), str("/k"), str("v")}), 1);
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].command == Command::kSet);
  CHECK(requests[0].keys[0] == "/k");
  CHECK(text(requests[0].values[0]) == "v");
}

TEST_CASE("2.x requests use the VALIDATE numbering") {
  const ByteVec bytes = cat({
      validate(),
      hex("0D 92100000"),                           // PING nonce 0x1092
      cat({byte(1), str("/k1"), str("v1")}),        // SET
      cat({byte(2), str("/k1"), str("v1"), str("v2")}),  // COMPARE_SET
      cat({byte(3), str("/k1")}),                   // GET
      cat({byte(4), str("/c"), u64le(7)}),          // ADD
      cat({byte(5), u64le(1), str("/k1")}),         // CHECK
      cat({byte(6), u64le(2), str("/a"), str("/b")}),  // WAIT
      byte(7),                                      // GETNUMKEYS
      cat({byte(8), str("/k1")}),                   // DELETE_KEY
      cat({byte(9), str("/log"), str("ab")}),       // APPEND
      cat({byte(10), u64le(2), str("/a"), str("/b")}),  // MULTI_GET
      cat({byte(11), u64le(2), str("/a"), str("1"), str("/b"), str("2")}),  // MULTI_SET
      byte(12),                                     // CANCEL_WAIT
  });
  for (std::size_t chunk : {std::size_t{1}, std::size_t{4}, bytes.size()}) {
    const auto r = parse_chunked(bytes, chunk);
    REQUIRE(r.size() == 14);
    CHECK(r[0].command == Command::kValidate);
    CHECK(r[1].command == Command::kPing);
    CHECK(r[1].word == 0x1092);
    CHECK(r[2].command == Command::kSet);
    CHECK(r[3].command == Command::kCompareSet);
    CHECK(r[4].command == Command::kGet);
    CHECK(r[5].command == Command::kAdd);
    CHECK(r[5].delta == 7);
    CHECK(r[6].command == Command::kCheck);
    CHECK(r[7].command == Command::kWait);
    CHECK(r[7].keys == std::vector<std::string>{"/a", "/b"});
    CHECK(r[8].command == Command::kGetNumKeys);
    CHECK(r[9].command == Command::kDeleteKey);
    CHECK(r[10].command == Command::kAppend);
    CHECK(text(r[10].values[0]) == "ab");
    CHECK(r[11].command == Command::kMultiGet);
    CHECK(r[12].command == Command::kMultiSet);
    CHECK(r[12].keys == std::vector<std::string>{"/a", "/b"});
    CHECK(text(r[12].values[1]) == "2");
    CHECK(r[13].command == Command::kCancelWait);
  }
}

TEST_CASE("2.x queue, LIST_KEYS and BARRIER requests parse split anywhere") {
  const ByteVec bytes = cat({
      validate(),
      cat({byte(14), str("/q"), str("job")}),  // QUEUE_PUSH
      cat({byte(15), str("/q")}),              // QUEUE_POP
      cat({byte(16), str("/q")}),              // QUEUE_LEN
      byte(17),                                // LIST_KEYS
      cat({byte(18), str("/bar"), u64le(3)}),  // BARRIER
      byte(7),                                 // GETNUMKEYS: the stream stays in step
  });
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, bytes.size()}) {
    const auto r = parse_chunked(bytes, chunk);
    REQUIRE(r.size() == 7);
    CHECK(r[1].command == Command::kQueuePush);
    CHECK(r[1].keys == std::vector<std::string>{"/q"});
    CHECK(text(r[1].values[0]) == "job");
    CHECK(r[2].command == Command::kQueuePop);
    CHECK(r[2].keys == std::vector<std::string>{"/q"});
    CHECK(r[3].command == Command::kQueueLen);
    CHECK(r[4].command == Command::kListKeys);
    CHECK(r[4].keys.empty());
    CHECK(r[5].command == Command::kBarrier);
    CHECK(r[5].keys == std::vector<std::string>{"/bar"});
    CHECK(r[5].delta == 3);
    CHECK(r[6].command == Command::kGetNumKeys);
  }
}

TEST_CASE("a QUEUE_PUSH value past the value limit is bad input before it is read") {
  RequestParser parser(Limits{.max_value_bytes = 32});
  const ByteVec bytes = cat({validate(), byte(14), str("/q"), u64le(33)});
  auto result = parser.feed(bytes);
  REQUIRE(result.status == ParseStatus::kOk);
  parser.take_request();
  REQUIRE(parser.feed(std::span(bytes).subspan(result.consumed)).status == ParseStatus::kBad);
  CHECK(parser.error() == "value length 33 exceeds the limit of 32 bytes");
}

TEST_CASE("the 2.0-era pre-VALIDATE numbering serves APPEND to CANCEL_WAIT as 9 to 12") {
  const auto r = parse_all(cat({cat({byte(9), str("/k"), str("x")}), byte(12)}));
  REQUIRE(r.size() == 2);
  CHECK(r[0].command == Command::kAppend);
  CHECK(r[1].command == Command::kCancelWait);
}

TEST_CASE("empty keys, empty values and zero-key queries are valid") {
  const auto r = parse_all(cat({cat({byte(0), str(""), str("")}), cat({byte(5), u64le(0)})}));
  REQUIRE(r.size() == 2);
  CHECK(r[0].keys[0].empty());
  CHECK(r[0].values[0].empty());
  CHECK(r[1].command == Command::kWait);
  CHECK(r[1].keys.empty());
}

TEST_CASE("binary values survive byte for byte") {
  ByteVec value;
  for (int i = 0; i < 256; ++i) value.push_back(static_cast<std::uint8_t>(i));
  const auto r = parse_chunked(cat({byte(0), str("/bin"), u64le(value.size()), value}), 100);
  REQUIRE(r.size() == 1);
  CHECK(r[0].values[0] == value);
}

TEST_CASE("unknown command bytes are bad input in each dialect") {
  {
    RequestParser parser;
    const ByteVec bytes = hex("0D 00000000");  // PING is not a 1.13 command
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    CHECK(parser.error() == "unknown command byte 0x0d in the 1.13 dialect");
  }
  {
    RequestParser parser;
    const ByteVec bytes = cat({validate(), hex("13")});  // past BARRIER (18)
    auto result = parser.feed(bytes);
    REQUIRE(result.status == ParseStatus::kOk);
    parser.take_request();
    std::span<const std::uint8_t> rest(bytes);
    REQUIRE(parser.feed(rest.subspan(result.consumed)).status == ParseStatus::kBad);
    CHECK(parser.error() == "unknown command byte 0x13 in the 2.x dialect");
  }
  for (std::uint8_t queue_push_and_on = 14; queue_push_and_on <= 18; ++queue_push_and_on) {
    RequestParser parser;  // 2.x's QUEUE_PUSH .. BARRIER bytes mean nothing to 1.13
    const ByteVec bytes = cat({byte(queue_push_and_on), str("/q"), str("v")});
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    CHECK(parser.error() ==
          fmt::format("unknown command byte 0x{:02x} in the 1.13 dialect", queue_push_and_on));
  }
  {
    RequestParser parser;
    const ByteVec bytes = hex("FF");
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    // The parser stays bad.
    REQUIRE(parser.feed(hex("06")).status == ParseStatus::kBad);
  }
}

TEST_CASE("lengths past the limits are bad input before anything is allocated") {
  Limits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 32;
  limits.max_keys_per_query = 4;
  {
    RequestParser parser(limits);
    const ByteVec bytes = cat({byte(2), u64le(17)});
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    CHECK(parser.error() == "key length 17 exceeds the limit of 16 bytes");
  }
  {
    RequestParser parser(limits);
    const ByteVec bytes = cat({byte(0), str("/k"), u64le(std::uint64_t{1} << 60)});
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    CHECK(parser.error() == "value length 1152921504606846976 exceeds the limit of 32 bytes");
  }
  {
    RequestParser parser(limits);
    const ByteVec bytes = cat({byte(5), u64le(5)});
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
    CHECK(parser.error() == "5 keys in one query exceed the limit of 4");
  }
  {
    RequestParser parser;  // default limits: 2^60 is past any of them
    const ByteVec bytes = cat({byte(2), u64le(std::uint64_t{1} << 60)});
    REQUIRE(parser.feed(bytes).status == ParseStatus::kBad);
  }
}

TEST_CASE("VALIDATE with a wrong magic after the handshake is bad input") {
  RequestParser parser;
  const ByteVec first = validate();
  REQUIRE(parser.feed(first).status == ParseStatus::kOk);
  parser.take_request();
  const ByteVec again = hex("00 01020304");
  REQUIRE(parser.feed(again).status == ParseStatus::kBad);
  CHECK(parser.error() == "VALIDATE with magic 0x04030201, expected 0x3c85f7ce");
}

TEST_CASE("a truncated request needs more and is not idle") {
  RequestParser parser;
  const ByteVec bytes = hex("00 0300000000000000 2f6b");
  const auto result = parser.feed(bytes);
  CHECK(result.status == ParseStatus::kNeedMore);
  CHECK(result.consumed == bytes.size());
  CHECK_FALSE(parser.is_idle());
}

TEST_CASE("command numbering maps both ways") {
  for (auto dialect : {Dialect::kTorch113, Dialect::kTorch2}) {
    for (unsigned b = 0; b < 256; ++b) {
      const auto command = decode_command(dialect, static_cast<std::uint8_t>(b));
      if (command) CHECK(encode_command(dialect, *command) == b);
    }
  }
  CHECK(encode_command(Dialect::kTorch113, Command::kSet) == 0);
  CHECK(encode_command(Dialect::kTorch2, Command::kSet) == 1);
  CHECK(encode_command(Dialect::kTorch2, Command::kPing) == 13);
  CHECK(encode_command(Dialect::kTorch2, Command::kQueuePush) == 14);
  CHECK(encode_command(Dialect::kTorch2, Command::kQueuePop) == 15);
  CHECK(encode_command(Dialect::kTorch2, Command::kQueueLen) == 16);
  CHECK(encode_command(Dialect::kTorch2, Command::kListKeys) == 17);
  CHECK(encode_command(Dialect::kTorch2, Command::kBarrier) == 18);
  CHECK_FALSE(decode_command(Dialect::kTorch2, 19));
  CHECK_FALSE(encode_command(Dialect::kTorch113, Command::kQueuePush));
  CHECK_FALSE(encode_command(Dialect::kTorch113, Command::kBarrier));
  CHECK_FALSE(encode_command(Dialect::kTorch2, Command::kWatchKey));
  CHECK_FALSE(encode_command(Dialect::kTorch113, Command::kValidate));
}
