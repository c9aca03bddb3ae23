// The tag's message is context || run_id || NUL || challenge: the NUL keeps run id "ab" with a
// challenge starting "c" apart from run id "abc", and the fixed context keeps the secret's
// HMACs for this handshake apart from any other use a site makes of the same file. A munge
// payload is built the same way with its own context, so neither answer stands for the other.

#include "rendezvous/auth/auth_protocol.hpp"

#include <string>

namespace ddp::rdzv::auth {
namespace {

std::string bound_message(std::string_view context, const std::string& run_id,
                          std::span<const std::uint8_t> challenge) {
  std::string message;
  message.reserve(context.size() + run_id.size() + 1 + challenge.size());
  message.append(context).append(run_id).push_back('\0');
  message.append(challenge.begin(), challenge.end());
  return message;
}

}  // namespace

// A link-local address names a peer only together with the server's own interface (its scope),
// which the client cannot know: such a worker is not admitted by it. Loopback is always admitted.
bool is_reportable(const boost::asio::ip::address& address) {
  if (address.is_loopback() || address.is_unspecified()) return false;
  return !(address.is_v6() && address.to_v6().is_link_local());
}

std::vector<std::uint8_t> hello_bytes(const std::vector<boost::asio::ip::address>& addresses) {
  std::vector<std::uint8_t> out(kHello.begin(), kHello.end());
  const std::size_t count_at = out.size();
  out.push_back(0);
  const auto put = [&out](const auto& bytes) {
    out.push_back(static_cast<std::uint8_t>(bytes.size()));
    out.insert(out.end(), bytes.begin(), bytes.end());
  };
  for (const auto& address : addresses) {
    if (out[count_at] == kMaxReportedAddresses) break;
    if (!is_reportable(address)) continue;
    if (address.is_v4()) {
      put(address.to_v4().to_bytes());
    } else {
      put(address.to_v6().to_bytes());
    }
    ++out[count_at];
  }
  return out;
}

Tag auth_tag(const Credentials& credentials, std::span<const std::uint8_t> challenge) {
  return hmac_sha256(credentials.secret, bound_message(kTagContext, credentials.run_id, challenge));
}

std::string munge_payload(const std::string& run_id, std::span<const std::uint8_t> challenge) {
  return bound_message(kMungeContext, run_id, challenge);
}

}  // namespace ddp::rdzv::auth
