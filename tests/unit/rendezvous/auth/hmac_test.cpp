// HMAC-SHA256 against RFC 4231's test vectors, the tag's binding to the secret, the run id and
// the challenge, and the constant-time comparison's answers.

#include <catch2/catch.hpp>

#include <string>

#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/hmac.hpp"

using namespace ddp::rdzv::auth;

namespace {

std::string hex_of(const Tag& tag) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (const auto b : tag) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("hmac_sha256 matches RFC 4231's test vectors", "[auth]") {
  SECTION("test case 1: a 20-byte key of 0x0b") {
    CHECK(hex_of(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  }
  SECTION("test case 2: a short key") {
    CHECK(hex_of(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  }
  SECTION("test case 6: a key longer than the block") {
    CHECK(hex_of(hmac_sha256(std::string(131, '\xaa'),
                             "Test Using Larger Than Block-Size Key - Hash Key First")) ==
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  }
}

TEST_CASE("the tag depends on the secret, the run id and the challenge", "[auth]") {
  const Credentials job{"0123456789abcdef-secret", "job-7"};
  const std::vector<std::uint8_t> challenge(kChallengeBytes, 0x5a);
  const Tag tag = auth_tag(job, challenge);
  CHECK(auth_tag(job, challenge) == tag);
  CHECK(auth_tag(Credentials{"0123456789abcdef-secreT", "job-7"}, challenge) != tag);
  CHECK(auth_tag(Credentials{job.secret, "job-8"}, challenge) != tag);
  auto other = challenge;
  other[31] ^= 1;
  CHECK(auth_tag(job, other) != tag);
  // The run id is NUL-terminated in the message: "ab" + "c..." is not "abc" + "...".
  std::vector<std::uint8_t> shifted(kChallengeBytes, 0x5a);
  CHECK(auth_tag(Credentials{job.secret, "ab"}, shifted) !=
        auth_tag(Credentials{job.secret, "abZ"}, std::vector<std::uint8_t>(31, 0x5a)));
}

TEST_CASE("random challenges differ and equal_in_constant_time compares whole spans", "[auth]") {
  const auto a = random_bytes(kChallengeBytes);
  const auto b = random_bytes(kChallengeBytes);
  CHECK(a.size() == kChallengeBytes);
  CHECK(a != b);
  CHECK(equal_in_constant_time(a, a));
  CHECK_FALSE(equal_in_constant_time(a, b));
  CHECK_FALSE(equal_in_constant_time(a, std::span(a).first(31)));
}
