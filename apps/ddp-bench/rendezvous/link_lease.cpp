// The holding coroutine re-reads the connection and the key list after every wait, so a drop only
// has to swap them and close the old connection: the wait in flight then fails and the loop
// parks the remaining keys on the new connection.

#include "apps/ddp-bench/rendezvous/link_lease.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include "rendezvous/store/store_lease.hpp"

namespace ddp::bench {

namespace asio = boost::asio;

struct LinkLease::State {
  std::string host;
  std::uint16_t port = 0;
  rdzv::ConnectOptions options;
  std::vector<std::string> hold_keys;
  std::unique_ptr<rdzv::TcpStoreClient> client;
  bool stopped = false;
};

namespace {

asio::awaitable<void> hold(std::shared_ptr<LinkLease::State> s) {
  while (!s->stopped && s->client && !s->hold_keys.empty()) {
    try {
      co_await s->client->wait_for(s->hold_keys, std::chrono::minutes(10));
    } catch (const std::exception&) {
      // The connection was closed under the wait (a drop): park on the new one.
    }
  }
}

}  // namespace

LinkLease::LinkLease(std::shared_ptr<State> state) : state_(std::move(state)) {}

LinkLease::~LinkLease() {
  state_->stopped = true;
  state_->client.reset();
}

asio::awaitable<std::unique_ptr<LinkLease>> LinkLease::open(std::string host, std::uint16_t port,
                                                            rdzv::ConnectOptions options,
                                                            std::vector<std::string> bases) {
  auto s = std::make_shared<State>();
  s->host = std::move(host);
  s->port = port;
  s->options = options;
  for (const auto& base : bases) s->hold_keys.push_back(rdzv::lease_hold_key(base));
  s->client = co_await rdzv::TcpStoreClient::connect(s->host, s->port, s->options);
  asio::co_spawn(co_await asio::this_coro::executor, hold(s), [](std::exception_ptr) {});
  co_return std::unique_ptr<LinkLease>(new LinkLease(s));
}

asio::awaitable<void> LinkLease::drop(std::string base) {
  const std::shared_ptr<State> s = state_;
  const std::string key = rdzv::lease_hold_key(base);
  s->hold_keys.erase(std::remove(s->hold_keys.begin(), s->hold_keys.end(), key),
                     s->hold_keys.end());
  std::unique_ptr<rdzv::TcpStoreClient> next;
  if (!s->hold_keys.empty()) {
    next = co_await rdzv::TcpStoreClient::connect(s->host, s->port, s->options);
  }
  std::swap(s->client, next);
  next.reset();  // the old connection closes: the store drops its wait on every key
}

}  // namespace ddp::bench
