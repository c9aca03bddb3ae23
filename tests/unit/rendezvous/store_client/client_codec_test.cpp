// The client codec against the bytes of spec/torchrun.md §5.9 (captured PyTorch 1.13 traffic) and
// §5.3/5.4 (2.x numbering, VALIDATE, PING), and incremental reply decoding.
#include "rendezvous/wire/client_codec.hpp"

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "tests/unit/rendezvous/store_client/scripted_server.hpp"

namespace ddp::rdzv::wire {
namespace {

using test::hex;

ByteVec b(std::string_view s) { return ByteVec(s.begin(), s.end()); }

template <typename F>
ByteVec encoded(Dialect d, F f) {
  ByteVec out;
  f(RequestEncoder(d), out);
  return out;
}

TEST_CASE("1.13 requests match captured PyTorch 1.13 traffic byte for byte", "[codec]") {
  const auto d = Dialect::kTorch113;
  CHECK(encoded(d, [](auto e, auto& o) { e.set(o, "/k1", b("v1")); }) ==
        hex("00 | 0300000000000000 2f6b31 | 0200000000000000 7631"));
  CHECK(encoded(d, [](auto e, auto& o) { e.wait(o, {"/k1"}); }) ==
        hex("05 | 0100000000000000 | 0300000000000000 2f6b31"));
  CHECK(encoded(d, [](auto e, auto& o) { e.get(o, "/k1"); }) ==
        hex("02 | 0300000000000000 2f6b31"));
  CHECK(encoded(d, [](auto e, auto& o) { e.add(o, "/cnt", 5); }) ==
        hex("03 | 0400000000000000 2f636e74 | 0500000000000000"));
  CHECK(encoded(d, [](auto e, auto& o) { e.add(o, "/cnt", -2); }) ==
        hex("03 | 0400000000000000 2f636e74 | feffffffffffffff"));
  CHECK(encoded(d, [](auto e, auto& o) { e.compare_set(o, "/k1", b("v1"), b("v2")); }) ==
        hex("01 | 0300000000000000 2f6b31 | 0200000000000000 7631 | 0200000000000000 7632"));
  CHECK(encoded(d, [](auto e, auto& o) { e.compare_set(o, "/newk", b(""), b("x")); }) ==
        hex("01 | 0500000000000000 2f6e65776b | 0000000000000000 | 0100000000000000 78"));
  CHECK(encoded(d, [](auto e, auto& o) { e.get_num_keys(o); }) == hex("06"));
  CHECK(encoded(d, [](auto e, auto& o) { e.wait(o, {"/k1", "/cnt"}); }) ==
        hex("05 | 0200000000000000 | 0300000000000000 2f6b31 | 0400000000000000 2f636e74"));
  CHECK(encoded(d, [](auto e, auto& o) { e.delete_key(o, "/k1"); }) ==
        hex("08 | 0300000000000000 2f6b31"));
  CHECK(encoded(d, [](auto e, auto& o) { e.check(o, {"/ck"}); }) ==
        hex("04 | 0100000000000000 | 0300000000000000 2f636b"));
}

TEST_CASE("1.13 dialect has no VALIDATE or PING", "[codec]") {
  ByteVec out;
  RequestEncoder e(Dialect::kTorch113);
  CHECK_THROWS_AS(e.validate(out), InternalError);
  CHECK_THROWS_AS(e.ping(out, 1), InternalError);
}

TEST_CASE("2.x handshake is VALIDATE with the magic then PING with the nonce", "[codec]") {
  ByteVec out;
  RequestEncoder e(Dialect::kTorch2);
  e.validate(out);
  e.ping(out, 0x00109210);
  CHECK(out == hex("00 CE F7 85 3C  0D 10 92 10 00"));
}

TEST_CASE("2.x requests use the 2.x numbering", "[codec]") {
  const auto d = Dialect::kTorch2;
  CHECK(encoded(d, [](auto e, auto& o) { e.set(o, "/k1", b("v1")); }) ==
        hex("01 | 0300000000000000 2f6b31 | 0200000000000000 7631"));
  CHECK(encoded(d, [](auto e, auto& o) { e.compare_set(o, "k", b("a"), b("b")); })[0] == 0x02);
  CHECK(encoded(d, [](auto e, auto& o) { e.get(o, "/k1"); }) ==
        hex("03 | 0300000000000000 2f6b31"));
  CHECK(encoded(d, [](auto e, auto& o) { e.add(o, "/cnt", 5); })[0] == 0x04);
  CHECK(encoded(d, [](auto e, auto& o) { e.check(o, {"/ck"}); })[0] == 0x05);
  CHECK(encoded(d, [](auto e, auto& o) { e.wait(o, {"/k1"}); }) ==
        hex("06 | 0100000000000000 | 0300000000000000 2f6b31"));
  CHECK(encoded(d, [](auto e, auto& o) { e.get_num_keys(o); }) == hex("07"));
  CHECK(encoded(d, [](auto e, auto& o) { e.delete_key(o, "k"); })[0] == 0x08);
  CHECK(encoded(d, [](auto e, auto& o) { e.append(o, "/a", b("xy")); }) ==
        hex("09 | 0200000000000000 2f61 | 0200000000000000 7879"));
  CHECK(encoded(d, [](auto e, auto& o) { e.multi_get(o, {"/a", "/b"}); }) ==
        hex("0A | 0200000000000000 | 0200000000000000 2f61 | 0200000000000000 2f62"));
  CHECK(encoded(d, [](auto e, auto& o) {
          e.multi_set(o, {{"/a", b("1")}, {"/b", b("")}});
        }) == hex("0B | 0200000000000000 | 0200000000000000 2f61 | 0100000000000000 31 | "
                  "0200000000000000 2f62 | 0000000000000000"));
  CHECK(encoded(d, [](auto e, auto& o) { e.cancel_wait(o); }) == hex("0C"));
}

TEST_CASE("binary keys and values go out unchanged", "[codec]") {
  ByteVec value = {0x00, 0xff, 0x0a, 0x00};
  auto out = encoded(Dialect::kTorch2, [&](auto e, auto& o) {
    e.set(o, std::string_view("\0k", 2), value);
  });
  CHECK(out == hex("01 | 0200000000000000 006b | 0400000000000000 00ff0a00"));
}

// Feeds `bytes` to the decoder one byte at a time, as the slowest network would deliver them.
DecodeStatus feed_bytewise(ReplyDecoder& d, const ByteVec& bytes, std::size_t& total_used) {
  total_used = 0;
  DecodeStatus status = DecodeStatus::kNeedMore;
  for (std::size_t i = 0; i < bytes.size() && status == DecodeStatus::kNeedMore; ++i) {
    std::size_t used = 0;
    status = d.consume(ByteSpan(&bytes[i], 1), used);
    total_used += used;
  }
  return status;
}

TEST_CASE("replies decode whole or split at every byte", "[codec]") {
  ReplyDecoder d;
  std::size_t used = 0;
  SECTION("a value (GET of \"/k1\" in the captured traffic)") {
    const auto bytes = hex("0200000000000000 7631");
    d.expect(ReplyShape::kValue);
    REQUIRE(d.consume(bytes, used) == DecodeStatus::kOk);
    CHECK(used == bytes.size());
    CHECK(d.take_value() == b("v1"));
    d.expect(ReplyShape::kValue);
    REQUIRE(feed_bytewise(d, bytes, used) == DecodeStatus::kOk);
    CHECK(d.take_value() == b("v1"));
  }
  SECTION("an empty value") {
    d.expect(ReplyShape::kValue);
    REQUIRE(d.consume(hex("0000000000000000"), used) == DecodeStatus::kOk);
    CHECK(d.take_value().empty());
  }
  SECTION("an i64 (ADD -2 gives 3; negative values)") {
    d.expect(ReplyShape::kI64);
    REQUIRE(feed_bytewise(d, hex("0300000000000000"), used) == DecodeStatus::kOk);
    CHECK(d.i64() == 3);
    d.expect(ReplyShape::kI64);
    REQUIRE(d.consume(hex("feffffffffffffff"), used) == DecodeStatus::kOk);
    CHECK(d.i64() == -2);
  }
  SECTION("a u8 and a u32") {
    d.expect(ReplyShape::kU8);
    REQUIRE(d.consume(hex("01"), used) == DecodeStatus::kOk);
    CHECK(d.u8() == 1);
    d.expect(ReplyShape::kU32);
    REQUIRE(feed_bytewise(d, hex("10 92 10 00"), used) == DecodeStatus::kOk);
    CHECK(d.u32() == 0x00109210u);
  }
  SECTION("several values (MULTI_GET), including zero") {
    const auto bytes = hex("0100000000000000 61 | 0000000000000000 | 0200000000000000 6263");
    d.expect(ReplyShape::kValues, 3);
    REQUIRE(feed_bytewise(d, bytes, used) == DecodeStatus::kOk);
    CHECK(used == bytes.size());
    CHECK(d.take_values() == std::vector<ByteVec>{b("a"), b(""), b("bc")});
    d.expect(ReplyShape::kValues, 0);
    REQUIRE(d.consume({}, used) == DecodeStatus::kOk);
    CHECK(d.take_values().empty());
  }
}

TEST_CASE("a reply leaves the bytes of the next reply unconsumed", "[codec]") {
  // CANCEL_WAIT racing a completed wait: STOP_WAITING then WAIT_CANCELED in one segment.
  ReplyDecoder d;
  std::size_t used = 0;
  const auto bytes = hex("00 01");
  d.expect(ReplyShape::kU8);
  REQUIRE(d.consume(bytes, used) == DecodeStatus::kOk);
  CHECK(used == 1);
  CHECK(d.u8() == 0);
  d.expect(ReplyShape::kU8);
  REQUIRE(d.consume(ByteSpan(bytes).subspan(1), used) == DecodeStatus::kOk);
  CHECK(d.u8() == 1);
}

TEST_CASE("a value length past the limit is a bad reply", "[codec]") {
  ReplyDecoder d(1024);
  std::size_t used = 0;
  d.expect(ReplyShape::kValue);
  CHECK(d.consume(hex("0000000000000010"), used) == DecodeStatus::kBad);  // 2^60
  CHECK_THAT(d.error(), Catch::Contains("past the limit of 1024"));
  d.expect(ReplyShape::kValue);
  CHECK(d.consume(hex("0104000000000000"), used) == DecodeStatus::kBad);  // 1025
  d.expect(ReplyShape::kValue);
  CHECK(d.consume(hex("0004000000000000"), used) == DecodeStatus::kNeedMore);  // 1024 is fine
}

}  // namespace
}  // namespace ddp::rdzv::wire
