#pragma once
// LinkLease: the store leases (rendezvous/store/store_lease.hpp) of the simulated members that
// share one lease connection: a single WAIT parked on all their hold keys. A member that "dies"
// drops out of it as its own connection would: the connection closes (the store drops the wait on
// every key of it) and the others' keys are parked again at once on a new connection, well
// within the lease grace, so that only the dead member's lease expires. With one member per
// link it is exactly an agent's LeaseHolder. Runs on one io_context; not thread-safe.

#include <memory>
#include <string>
#include <vector>

#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::bench {

class LinkLease {
 public:
  // Opens the connection and starts holding the leases of `bases` (lease bases, full keys).
  // Throws as TcpStoreClient::connect does.
  static rdzv::asio::awaitable<std::unique_ptr<LinkLease>> open(std::string host,
                                                                std::uint16_t port,
                                                                rdzv::ConnectOptions options,
                                                                std::vector<std::string> bases);
  ~LinkLease();
  LinkLease(const LinkLease&) = delete;
  LinkLease& operator=(const LinkLease&) = delete;

  // The holder of `base` is gone: closes the connection and, when others remain, holds theirs
  // on a new one (opened first, so that the gap is one round trip).
  rdzv::asio::awaitable<void> drop(std::string base);

  struct State;  // shared with the holding coroutine

 private:
  explicit LinkLease(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace ddp::bench
