// The tag's message is context || run_id || NUL || challenge: the NUL keeps run id "ab" with a
// challenge starting "c" apart from run id "abc", and the fixed context keeps the secret's
// HMACs for this handshake apart from any other use a site makes of the same file.

#include "rendezvous/auth/auth_protocol.hpp"

#include <vector>

namespace ddp::rdzv::auth {

Tag auth_tag(const Credentials& credentials, std::span<const std::uint8_t> challenge) {
  std::vector<std::uint8_t> message;
  message.reserve(kTagContext.size() + credentials.run_id.size() + 1 + challenge.size());
  message.insert(message.end(), kTagContext.begin(), kTagContext.end());
  message.insert(message.end(), credentials.run_id.begin(), credentials.run_id.end());
  message.push_back(0);
  message.insert(message.end(), challenge.begin(), challenge.end());
  const auto& secret = credentials.secret;
  return hmac_sha256(std::span(reinterpret_cast<const std::uint8_t*>(secret.data()),
                               secret.size()),
                     message);
}

}  // namespace ddp::rdzv::auth
