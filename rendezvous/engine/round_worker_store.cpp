// The per-round worker store of the agent that hosts a round's workers.

#include "rendezvous/engine/round_worker_store.hpp"

#include "common/log.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

namespace ddp::rdzv {

RoundWorkerStore::RoundWorkerStore(boost::asio::io_context& io) : io_(io) {}

RoundWorkerStore::~RoundWorkerStore() = default;

std::pair<std::string, std::uint16_t> RoundWorkerStore::open(int round,
                                                             const std::string& bind_host,
                                                             const std::string& addr,
                                                             StoreGuard guard) {
  server_.reset();  // the previous round's workers are gone
  server_ = std::make_unique<TcpStoreServer>(io_, bind_host, 0, StoreLimits{}, std::move(guard));
  server_->start();
  log::get("rdzv")->debug("worker store for round {} at {}:{}", round, addr, server_->port());
  return std::make_pair(addr, server_->port());
}

}  // namespace ddp::rdzv
