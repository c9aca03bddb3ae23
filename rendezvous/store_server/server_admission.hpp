#pragma once
// ServerAdmission: the stage every store connection passes before its first request, as a
// StoreGuard says: refused at accept (a stranger to a members-only store without a secret),
// authenticated by the handshake, admitted as a member, served plainly (an open store), or
// refused. Sans-IO: a munge credential is checked by a call the connection runs off its loop
// (check()), whose answer comes back through finish_check(). Owned by one ServerConnection, on
// the server's io_context.

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/auth/munge_credential.hpp"
#include "rendezvous/auth/server_handshake.hpp"
#include "rendezvous/store_server/store_guard.hpp"

namespace ddp::rdzv {

class ServerAdmission {
 public:
  // kChecking: a munge credential must be checked: run check() off the loop (it blocks), then
  // finish_check(); the input after `consumed` waits meanwhile.
  enum class Outcome { kNeedMore, kOpen, kRefused, kChecking };
  struct Result {
    Outcome outcome;
    std::size_t consumed;  // input that belonged to the handshake; the rest is TCPStore
  };

  ServerAdmission(const StoreGuard& guard, const boost::asio::ip::address& peer);

  // True when the peer must authenticate to be served (no member, and a secret): its connection
  // gets a deadline for the handshake.
  bool needs_handshake() const { return guard_.credentials && !may_skip_handshake(); }
  // True once requests may be served.
  bool is_open() const { return open_; }

  // Takes the connection's first bytes until it is open or refused; appends the handshake's
  // replies to `out`. After kRefused, refusal() says why; send `out`, then close.
  Result feed(std::span<const std::uint8_t> data, std::vector<std::uint8_t>& out);
  // After kChecking: the blocking check (a round trip to munged), callable on any thread; its
  // answer goes to finish_check(), which returns kOpen or kRefused (consumed 0).
  std::function<std::optional<std::string>()> check() const;
  Result finish_check(const std::optional<std::string>& refusal, std::vector<std::uint8_t>& out);
  const std::string& refusal() const { return refusal_; }
  bool is_refused() const { return !refusal_.empty(); }
  // The peer's address (canonical), for log lines.
  const boost::asio::ip::address& peer() const { return peer_; }

 private:
  bool may_skip_handshake() const;
  void learn_reported();
  Result decide(auth::ServerHandshake::Result step);

  StoreGuard guard_;
  boost::asio::ip::address peer_;
  auth::ServerHandshake handshake_;
  auth::MungeCheck munge_check_;  // set when the secret is munge
  auth::MemberList::Hold held_;  // this connection's place in guard_.learn_into
  std::vector<auth::MemberList::Hold> reported_;  // the addresses its HELLO reported, held too
  bool open_ = false;
  std::string refusal_;
};

// True when nothing a peer at `peer` could send would let it in: the guard holds no secret and
// admits members only, and the peer is none. The server refuses such a connection at accept.
bool is_refused_at_accept(const StoreGuard& guard, const boost::asio::ip::address& peer);

// Logs `what` (a warning naming `address`) the first time it happens to that address in this
// process, and at debug level after; at most 1024 addresses are remembered.
void log_refusal_once(const std::string& address, const std::string& what);

}  // namespace ddp::rdzv
