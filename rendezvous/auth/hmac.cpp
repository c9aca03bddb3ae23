// HMAC-SHA256 through libcrypto's one-shot HMAC(): one call per handshake, so the EVP_MAC
// context API (and its per-call allocation) would buy nothing. A tag is compared with
// CRYPTO_memcmp, so a wrong guess learns nothing from the time the server took to refuse it.

#include "rendezvous/auth/hmac.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "ddp/error.hpp"

namespace ddp::rdzv::auth {

Tag hmac_sha256(std::string_view key, std::string_view message) {
  Tag tag{};
  unsigned int length = 0;
  // HMAC() takes a null key pointer as "no key" only when the length is 0 too; give it a byte.
  static const char kEmpty = 0;
  const unsigned char* out =
      HMAC(EVP_sha256(), key.empty() ? &kEmpty : key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.empty() ? &kEmpty : message.data()),
           message.size(), tag.data(), &length);
  if (out == nullptr || length != kTagBytes) throw InternalError("HMAC-SHA256 failed in libcrypto");
  return tag;
}

std::vector<std::uint8_t> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  if (n > 0 && RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    throw InternalError("RAND_bytes failed in libcrypto: no challenge for the store handshake");
  }
  return out;
}

bool equal_in_constant_time(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ddp::rdzv::auth
