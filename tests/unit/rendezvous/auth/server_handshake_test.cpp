// ServerHandshake without sockets: plain TCPStore clients pass untouched, a right tag opens the
// connection whatever the chunking, a wrong tag, a replayed tag and a malformed HELLO are
// refused with one byte, and a server without a secret answers "not required".

#include <catch2/catch.hpp>

#include "rendezvous/auth/server_handshake.hpp"
#include "tests/unit/rendezvous/auth/handshake_bytes.hpp"

using namespace ddp::rdzv::auth;
using Bytes = std::vector<std::uint8_t>;
using Status = ServerHandshake::Status;

using ddp::rdzv::auth::test::challenge_of;
using ddp::rdzv::auth::test::hello_without_address;

namespace {

const auto kJob = std::make_shared<const Credentials>(Credentials{"a-secret-of-16+bytes", "run1"});



Bytes tag_for(const Credentials& credentials, const Bytes& challenge) {
  const Tag tag = auth_tag(credentials, challenge);
  return Bytes(tag.begin(), tag.end());
}

Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("a TCPStore client's first bytes pass the handshake untouched", "[auth]") {
  ServerHandshake handshake(kJob, challenge_of(1));
  Bytes out;
  const Bytes validate = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
  const auto result = handshake.feed(validate, out);
  CHECK(result.status == Status::kPlain);
  CHECK(result.consumed == 0);
  CHECK(out.empty());
}

TEST_CASE("the right tag authenticates, in one piece or byte by byte", "[auth]") {
  const Bytes challenge = challenge_of(7);
  const Bytes request = {0x00, 0xCE, 0xF7, 0x85, 0x3C};  // VALIDATE behind the tag
  const Bytes input = cat(cat(hello_without_address(), tag_for(*kJob, challenge)), request);
  SECTION("one piece") {
    ServerHandshake handshake(kJob, challenge);
    Bytes out;
    const auto result = handshake.feed(input, out);
    CHECK(result.status == Status::kAuthenticated);
    CHECK(result.consumed == hello_without_address().size() + kTagBytes);  // the request is left for the parser
    CHECK(out == cat(cat(Bytes{1}, challenge), Bytes{2}));
  }
  SECTION("byte by byte") {
    ServerHandshake handshake(kJob, challenge);
    Bytes out;
    std::size_t i = 0;
    for (; i < input.size(); ++i) {
      const auto result = handshake.feed(std::span(input).subspan(i, 1), out);
      if (result.status != Status::kNeedMore) {
        CHECK(result.status == Status::kAuthenticated);
        break;
      }
      CHECK(result.consumed == 1);
    }
    CHECK(i + 1 == hello_without_address().size() + kTagBytes);
    CHECK(out.back() == 2);
  }
}

TEST_CASE("a wrong secret, another run id and a replayed tag are refused", "[auth]") {
  const Bytes challenge = challenge_of(9);
  Bytes tag;
  SECTION("wrong secret") { tag = tag_for(Credentials{"another-secret-16+b", "run1"}, challenge); }
  SECTION("another run id") { tag = tag_for(Credentials{kJob->secret, "run2"}, challenge); }
  SECTION("a tag captured from an earlier connection's challenge") {
    tag = tag_for(*kJob, challenge_of(8));
  }
  ServerHandshake handshake(kJob, challenge);
  Bytes out;
  const auto result = handshake.feed(cat(hello_without_address(), tag), out);
  CHECK(result.status == Status::kRefused);
  CHECK(out.back() == static_cast<std::uint8_t>(Verdict::kRefused));
  CHECK_THAT(handshake.error(), Catch::Contains("wrong handshake tag"));
}

TEST_CASE("a malformed HELLO is refused", "[auth]") {
  ServerHandshake handshake(kJob, challenge_of(3));
  Bytes out;
  Bytes bad = hello_without_address();
  bad[kHello.size() - 1] = 0x01;  // a version this server does not speak
  const auto result = handshake.feed(bad, out);
  CHECK(result.status == Status::kRefused);
  CHECK(out == Bytes{3});
  CHECK_THAT(handshake.error(), Catch::Contains("malformed"));
}

TEST_CASE("a server without a secret answers HELLO with not-required", "[auth]") {
  ServerHandshake handshake(nullptr, {});
  Bytes out;
  const auto result = handshake.feed(cat(hello_without_address(), Bytes{0x00, 0xCE}), out);
  CHECK(result.status == Status::kPlain);
  CHECK(result.consumed == hello_without_address().size());
  CHECK(out == Bytes{0});
}

TEST_CASE("a HELLO's addresses are read in any chunking, and a bad list is refused", "[auth]") {
  namespace ip = boost::asio::ip;
  const std::vector<ip::address> node = {ip::make_address("10.1.0.2"), ip::make_address("::1"),
                                         ip::make_address("10.2.0.2"),
                                         ip::make_address("fd00::2"),
                                         ip::make_address("127.0.0.1")};
  const Bytes input = hello_bytes(node);
  SECTION("byte by byte; loopback is not reported") {
    ServerHandshake handshake(nullptr, {});
    Bytes out;
    for (std::size_t i = 0; i < input.size(); ++i) {
      const auto result = handshake.feed(std::span(input).subspan(i, 1), out);
      CHECK(result.status == (i + 1 < input.size() ? Status::kNeedMore : Status::kPlain));
    }
    CHECK(handshake.reported_addresses() ==
          std::vector<ip::address>{node[0], node[2], node[3]});
  }
  SECTION("an address of 5 bytes") {
    Bytes bad = hello_bytes({});
    bad.back() = 1;
    bad.insert(bad.end(), {5, 1, 2, 3, 4, 5});
    ServerHandshake handshake(kJob, challenge_of(2));
    Bytes out;
    CHECK(handshake.feed(bad, out).status == Status::kRefused);
    CHECK_THAT(handshake.error(), Catch::Contains("address list"));
  }
  SECTION("more than 32 addresses") {
    Bytes bad = hello_bytes({});
    bad.back() = 33;
    ServerHandshake handshake(kJob, challenge_of(2));
    Bytes out;
    CHECK(handshake.feed(bad, out).status == Status::kRefused);
    CHECK(out == Bytes{3});
  }
}
