// TcpStoreServer: binds, then runs one accept coroutine that spawns a ServerConnection coroutine
// per socket. The acceptor, the shared read buffer and the registry of live connections live in a
// shared block that the coroutines hold, so stopping or destroying the server while the
// io_context still holds their frames is safe.

#include "rendezvous/tcp_store_server.hpp"

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/memory_store.hpp"
#include "rendezvous/server_connection.hpp"
#include "rendezvous/server_os.hpp"
#include "rendezvous/server_stats.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <memory>
#include <unordered_map>

namespace ddp::rdzv {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t kReadBufferBytes = std::size_t{256} << 10;

struct Shared {
  explicit Shared(asio::io_context& io) : acceptor(io) {}
  tcp::acceptor acceptor;
  // Not zeroed: zeroing 256 KiB faults in 64 pages at every server start (a millisecond or more
  // of a launch on VMs where page faults are slow); reads fill only what they use.
  std::unique_ptr<std::uint8_t[]> read_buffer =
      std::make_unique_for_overwrite<std::uint8_t[]>(kReadBufferBytes);
  std::unordered_map<ServerConnection*, std::shared_ptr<ServerConnection>> live;
  bool stopped = false;
};

std::vector<tcp::endpoint> endpoints_for(asio::io_context& io, const std::string& host,
                                         std::uint16_t port) {
  if (host.empty() || host == "0.0.0.0") return {tcp::endpoint(tcp::v4(), port)};
  if (host == "::") return {tcp::endpoint(tcp::v6(), port)};
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (!ec) return {tcp::endpoint(address, port)};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec) {
    throw IoError(fmt::format("store server cannot resolve its --host '{}': {}", host,
                              ec.message()));
  }
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

// Opens, binds and listens on the first endpoint that works; throws IoError naming the address.
void listen_on(tcp::acceptor& acceptor, const std::vector<tcp::endpoint>& endpoints,
               const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  for (const auto& endpoint : endpoints) {
    acceptor.close(ec);
    acceptor.open(endpoint.protocol(), ec);
    if (ec) continue;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (endpoint.protocol() == tcp::v6()) acceptor.set_option(asio::ip::v6_only(false), ec);
    acceptor.bind(endpoint, ec);
    if (ec) continue;
    acceptor.listen(listen_backlog(), ec);
    if (!ec) return;
  }
  std::string owner;
  if (ec == asio::error::address_in_use) {
    const std::string who = describe_port_owner(port);
    owner = who.empty() ? fmt::format(" (port {} is taken)", port)
                        : fmt::format(" (port {} is taken by {})", port, who);
  }
  throw IoError(fmt::format("store server cannot listen on {}:{}: {}{}",
                            host.empty() ? "0.0.0.0" : host, port, ec.message(), owner));
}

asio::awaitable<void> accept_loop(std::shared_ptr<Shared> shared, KeyTable* table,
                                  StoreLimits limits) {
  auto log = log::get("store");
  const wire::Limits wire_limits{limits.max_key_bytes, limits.max_value_bytes,
                                 limits.max_keys_per_query};
  auto executor = co_await asio::this_coro::executor;
  for (;;) {
    auto [ec, socket] = co_await shared->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (shared->stopped || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of descriptors: the pending connection stays in the backlog; try again shortly.
      log->warn("store server accept failed: {}", ec.message());
      asio::steady_timer pause(executor, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      if (shared->stopped) co_return;
      continue;
    }
    if (shared->live.size() >= limits.max_connections) {
      log->warn("store server refuses a connection: {} connections is the limit",
                limits.max_connections);
      ServerStats::add(server_stats().connections_refused);
      continue;  // `socket` closes here
    }
    auto connection =
        std::make_shared<ServerConnection>(std::move(socket), *table, wire_limits,
                                           std::span(shared->read_buffer.get(), kReadBufferBytes));
    ServerStats::add(server_stats().connections_accepted);
    ServerConnection* key = connection.get();
    shared->live.emplace(key, connection);
    // Forgotten when closed: at the end of serve(), or after its last write, or by stop().
    connection->set_on_close([weak = std::weak_ptr<Shared>(shared), key] {
      if (auto alive = weak.lock()) alive->live.erase(key);
    });
    asio::co_spawn(executor, connection->serve(),
                   [connection, log](std::exception_ptr error) {
                     if (!error) return;
                     try {
                       std::rethrow_exception(error);
                     } catch (const std::exception& e) {
                       log->warn("closing store connection from {}: {}", connection->peer(),
                                 e.what());
                     }
                     connection->close();
                   });
  }
}

}  // namespace

struct TcpStoreServer::Impl {
  Impl(asio::io_context& io, std::string host, StoreLimits limits)
      : io(io), host(std::move(host)), limits(limits), store(io.get_executor()),
        shared(std::make_shared<Shared>(io)) {}
  asio::io_context& io;
  std::string host;
  StoreLimits limits;
  MemoryStore store;
  ServerStats::TableRegistration counted{store.table()};  // keys and waiters in the metrics
  std::shared_ptr<Shared> shared;
  std::uint16_t port = 0;
  bool started = false;
};

TcpStoreServer::TcpStoreServer(asio::io_context& io, const std::string& host, std::uint16_t port,
                               StoreLimits limits)
    : impl_(std::make_unique<Impl>(io, host, limits)) {
  const auto fd_limit = raise_fd_limit();
  listen_on(impl_->shared->acceptor, endpoints_for(io, host, port), host, port);
  impl_->port = impl_->shared->acceptor.local_endpoint().port();
  log::get("store")->debug("store server bound to {}:{} (descriptor limit {})",
                           host.empty() ? "0.0.0.0" : host, impl_->port, fd_limit);
}

TcpStoreServer::~TcpStoreServer() { stop(); }

void TcpStoreServer::start() {
  if (impl_->started || impl_->shared->stopped) return;
  impl_->started = true;
  asio::co_spawn(impl_->io, accept_loop(impl_->shared, &impl_->store.table(), impl_->limits),
                 asio::detached);
}

void TcpStoreServer::stop() {
  auto& shared = *impl_->shared;
  if (shared.stopped) return;
  shared.stopped = true;
  boost::system::error_code ignored;
  shared.acceptor.close(ignored);
  auto live = std::move(shared.live);
  shared.live.clear();
  for (auto& [key, connection] : live) connection->close();
}

std::uint16_t TcpStoreServer::port() const { return impl_->port; }
const std::string& TcpStoreServer::host() const { return impl_->host; }
std::size_t TcpStoreServer::connection_count() const { return impl_->shared->live.size(); }
MemoryStore& TcpStoreServer::store() { return impl_->store; }

}  // namespace ddp::rdzv
