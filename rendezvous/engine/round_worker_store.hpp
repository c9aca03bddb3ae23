#pragma once
// RoundWorkerStore: the store a round's workers meet at (MASTER_ADDR, MASTER_PORT) on the agent
// that hosts it, for both elastic backends: a fresh TcpStoreServer per round on a free port, so
// that rounds that spend no restart (and so share TORCHELASTIC_RESTART_COUNT) never read each
// other's worker keys. Owned by the backend; runs on the agent's io_context.

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "rendezvous/store_server/store_guard.hpp"

namespace ddp::rdzv {

class TcpStoreServer;

class RoundWorkerStore {
 public:
  explicit RoundWorkerStore(boost::asio::io_context& io);
  ~RoundWorkerStore();

  // Closes the previous round's store (its workers are gone) and opens the store of `round` on
  // `bind_host`, admitting whom `guard` admits; returns where the workers reach it: `addr` and
  // the port. Throws IoError when it cannot bind.
  std::pair<std::string, std::uint16_t> open(int round, const std::string& bind_host,
                                             const std::string& addr, StoreGuard guard);

 private:
  boost::asio::io_context& io_;
  std::unique_ptr<TcpStoreServer> server_;
};

}  // namespace ddp::rdzv
