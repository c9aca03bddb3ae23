// The handshake costs a store without a guard one comparison of the first byte: a TCPStore
// request never starts with 0xDD, so a plain client goes straight to the parser. A refused
// connection is told one byte (or nothing: a request from a stranger is never answered), and the
// reason goes to the log, once per address, so that a flood cannot flood the log too.

#include "rendezvous/store_server/server_admission.hpp"

#include <mutex>
#include <set>

#include "common/log.hpp"
#include "rendezvous/auth/hmac.hpp"
#include "rendezvous/auth/munge_credential.hpp"
#include "rendezvous/store_server/server_stats.hpp"

namespace ddp::rdzv {
namespace {

std::vector<std::uint8_t> challenge_for(const StoreGuard& guard) {
  if (!guard.credentials) return {};
  return auth::random_bytes(auth::kChallengeBytes);
}

auth::MungeCheck munge_check_for(const StoreGuard& guard) {
  if (!guard.credentials || !guard.credentials->uses_munge()) return {};
  return auth::munge_check_for(*guard.credentials);
}

}  // namespace

ServerAdmission::ServerAdmission(const StoreGuard& guard, const boost::asio::ip::address& peer)
    : guard_(guard),
      peer_(auth::canonical_address(peer)),
      handshake_(guard.credentials, challenge_for(guard)),
      munge_check_(munge_check_for(guard)) {
  // Without a secret every connection of the store that learns is one of the job's (the
  // rendezvous store is open: anyone who can join is a member, as before).
  if (guard_.learn_into && !guard_.credentials) held_ = guard_.learn_into->hold(peer_);
}

bool ServerAdmission::may_skip_handshake() const {
  if (guard_.members) return guard_.members->admits(peer_);
  return !guard_.credentials;
}

ServerAdmission::Result ServerAdmission::feed(std::span<const std::uint8_t> data,
                                              std::vector<std::uint8_t>& out) {
  return decide(handshake_.feed(data, out));
}

std::function<std::optional<std::string>()> ServerAdmission::check() const {
  return [check = munge_check_, query = handshake_.munge_query()] {
    return check(query.credential, query.payload);
  };
}

ServerAdmission::Result ServerAdmission::finish_check(const std::optional<std::string>& refusal,
                                                      std::vector<std::uint8_t>& out) {
  return decide(handshake_.finish_munge(refusal, out));
}

ServerAdmission::Result ServerAdmission::decide(auth::ServerHandshake::Result step) {
  using Status = auth::ServerHandshake::Status;
  switch (step.status) {
    case Status::kNeedMore:
      return {Outcome::kNeedMore, step.consumed};
    case Status::kCheckMunge:
      return {Outcome::kChecking, step.consumed};
    case Status::kAuthenticated:
      open_ = true;
      ServerStats::add(server_stats().connections_authenticated);
      if (guard_.learn_into) held_ = guard_.learn_into->hold(peer_);
      learn_reported();
      return {Outcome::kOpen, step.consumed};
    case Status::kPlain:
      if (!guard_.credentials) learn_reported();  // an open store learns every agent's node
      // Decided now, not at accept: the member list may have grown since (an agent connected).
      if (may_skip_handshake()) {
        open_ = true;
        return {Outcome::kOpen, step.consumed};
      }
      ServerStats::add(server_stats().requests_unauthenticated);
      refusal_ = guard_.members
                     ? "a request without authentication from an address that is not one of the "
                       "job's nodes"
                     : "a request without authentication (this store needs the job secret)";
      return {Outcome::kRefused, step.consumed};
    case Status::kRefused:
      break;
  }
  ServerStats::add(server_stats().handshakes_refused);
  refusal_ = handshake_.error();
  return {Outcome::kRefused, step.consumed};
}

// The addresses an agent's HELLO reported are its node's other interfaces: that node's workers
// may reach a workers' store from any of them (a multi-homed node, another route).
void ServerAdmission::learn_reported() {
  if (!guard_.learn_into) return;
  for (const auto& address : handshake_.reported_addresses()) {
    reported_.push_back(guard_.learn_into->hold(address));
  }
}

bool is_refused_at_accept(const StoreGuard& guard, const boost::asio::ip::address& peer) {
  return !guard.credentials && guard.members && !guard.members->admits(peer);
}

void log_refusal_once(const std::string& address, const std::string& what) {
  constexpr std::size_t kRemembered = 1024;
  static std::mutex mutex;
  static std::set<std::string> seen;
  bool first = false;
  {
    const std::lock_guard lock(mutex);
    if (seen.size() < kRemembered) first = seen.insert(address).second;
  }
  if (first) {
    log::get("store")->warn("store refused {} from {} (logged once per address; counted in "
                            "ddp_store_refused_total)",
                            what, address);
  } else {
    log::get("store")->debug("store refused {} from {}", what, address);
  }
}

}  // namespace ddp::rdzv
