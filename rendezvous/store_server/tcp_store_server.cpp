// TcpStoreServer: binds, then runs one accept coroutine that spawns a ServerConnection coroutine
// per socket. The acceptor, the shared read buffer and the registry of live connections live in a
// shared block that the coroutines hold, so stopping or destroying the server while the
// io_context still holds their frames is safe. Connections refused at a limit (descriptors, the
// connection count) are logged once per burst, never once per connection.

#include "rendezvous/store_server/tcp_store_server.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <unordered_map>

#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store_server/server_admission.hpp"
#include "rendezvous/store_server/server_connection.hpp"
#include "rendezvous/store_server/server_os.hpp"
#include "rendezvous/store_server/server_stats.hpp"

namespace ddp::rdzv {
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr std::size_t kReadBufferBytes = std::size_t{256} << 10;
// How long the acceptor rests when the process is out of descriptors (or accept keeps failing).
constexpr std::chrono::milliseconds kDescriptorPause{100};

struct Shared {
  explicit Shared(asio::io_context& io) : acceptor(io) {}
  tcp::acceptor acceptor;
  // Not zeroed: zeroing 256 KiB faults in 64 pages at every server start (a millisecond or more
  // of a launch on VMs where page faults are slow); reads fill only what they use.
  std::unique_ptr<std::uint8_t[]> read_buffer =
      std::make_unique_for_overwrite<std::uint8_t[]>(kReadBufferBytes);
  std::unordered_map<ServerConnection*, std::shared_ptr<ServerConnection>> live;
  SpareDescriptor spare;
  bool stopped = false;
};

// Connections refused in a row: one line when refusing starts, one when accepting resumes.
class RefusalBurst {
 public:
  void refused(const std::string& why, std::size_t connections) {
    if (!refusing_) {
      refusing_ = true;
      log::get("store")->warn("store server refuses new connections: {} (logged once until it "
                              "accepts again)", why);
    }
    count_ += connections;
  }
  void accepted() {
    if (!refusing_) return;
    log::get("store")->warn("store server accepts connections again after refusing {}", count_);
    refusing_ = false;
    count_ = 0;
  }

 private:
  bool refusing_ = false;
  std::size_t count_ = 0;
};

bool is_out_of_descriptors(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors ||
         ec == boost::system::errc::too_many_files_open_in_system ||
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
}

std::vector<tcp::endpoint> endpoints_for(asio::io_context& io, const std::string& host,
                                         std::uint16_t port) {
  if (host.empty()) return {tcp::endpoint(tcp::v4(), port)};
  boost::system::error_code ec;  // "0.0.0.0" and "::" are literals too
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

// The place a connection begins: accepted, registered in `live`, and its coroutine started.
void start_connection(const std::shared_ptr<Shared>& shared, tcp::socket socket, KeyTable& table,
                      const StoreLimits& limits, const StoreGuard& guard) {
  set_keepalive(socket.native_handle(), limits.keepalive);
  auto connection = std::make_shared<ServerConnection>(
      std::move(socket), table, limits, std::span(shared->read_buffer.get(), kReadBufferBytes),
      guard);
  ServerConnection* key = connection.get();
  shared->live.emplace(key, connection);
  // Forgotten when closed: at the end of serve(), or after its last write, or by stop().
  connection->set_on_close([weak = std::weak_ptr<Shared>(shared), key] {
    if (auto alive = weak.lock()) alive->live.erase(key);
  });
  asio::co_spawn(shared->acceptor.get_executor(), connection->serve(),
                 [connection](std::exception_ptr error) {
                   if (!error) return;
                   log::get("store")->warn("closing store connection from {}: {}",
                                           connection->peer(), error_text(error));
                   connection->close();
                 });
}

// A stranger to a members-only store without a secret: closed at once, before it costs a
// connection's state, counted and logged once per address.
bool refuse_stranger(const tcp::socket& socket, const StoreGuard& guard) {
  if (!guard.members || guard.credentials) return false;
  const auto address = peer_address(socket);
  if (!is_refused_at_accept(guard, address)) return false;
  ServerStats::add(server_stats().refused_not_member);
  log_refusal_once(address.to_string(),
                   "a connection from an address that is not one of the job's nodes");
  return true;
}

// A stranger to a members-only store whose list is still being filled (an etcd round's, while
// its host reads the round's members) waits, unread, until the list is settled or the handshake
// deadline passes, and is then admitted or refused as at accept: a worker that starts before its
// node is known is not turned away.
asio::awaitable<void> admit_when_settled(std::shared_ptr<Shared> shared, tcp::socket socket,
                                         KeyTable* table, StoreLimits limits, StoreGuard guard) {
  auto timer = std::make_shared<asio::steady_timer>(socket.get_executor(),
                                                    limits.handshake_timeout);
  guard.members->on_settled([weak = std::weak_ptr(timer)] {
    if (auto t = weak.lock()) t->cancel();
  });
  if (!guard.members->is_settled()) co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  if (shared->stopped) co_return;
  if (refuse_stranger(socket, guard)) co_return;
  ServerStats::add(server_stats().connections_accepted);
  start_connection(shared, std::move(socket), *table, limits, guard);
}

// True when the connection must wait for the member list (admit_when_settled).
bool waits_for_members(const tcp::socket& socket, const StoreGuard& guard) {
  if (!guard.members || guard.credentials || guard.members->is_settled()) return false;
  const auto address = peer_address(socket);
  return !address.is_unspecified() && !guard.members->admits(address);
}

asio::awaitable<void> accept_loop(std::shared_ptr<Shared> shared, KeyTable* table,
                                  StoreLimits limits, StoreGuard guard) {
  auto executor = co_await asio::this_coro::executor;
  RefusalBurst burst;
  for (;;) {
    auto [ec, socket] = co_await shared->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (shared->stopped || ec == asio::error::operation_aborted) co_return;
    if (is_out_of_descriptors(ec)) {
      // Linux's accept fails with EMFILE before it looks at the backlog, so this comes back at
      // once whether or not anyone is waiting. Take every pending connection off the backlog
      // (refused: their peers see the connection close at once), then rest until the next
      // connection arrives or kDescriptorPause passes (descriptors may have been freed), so that
      // neither this loop nor the log spins while the process is at its limit.
      std::size_t refused = 0;
      while (shared->spare.refuse_one(shared->acceptor.native_handle())) ++refused;
      burst.refused(ec.message(), refused);
      ServerStats::add(server_stats().connections_refused, refused);
      asio::steady_timer pause(executor, kDescriptorPause);
      co_await (shared->acceptor.async_wait(tcp::acceptor::wait_read,
                                            asio::as_tuple(asio::use_awaitable)) ||
                pause.async_wait(asio::as_tuple(asio::use_awaitable)));
      if (shared->stopped) co_return;
      continue;
    }
    if (ec) {
      // The peer gave up before we took it (ECONNABORTED): nothing to serve. Anything else may
      // last, so rest a moment rather than spin.
      log::get("store")->debug("store server accept failed: {}", ec.message());
      if (ec != asio::error::connection_aborted) {
        asio::steady_timer pause(executor, kDescriptorPause);
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        if (shared->stopped) co_return;
      }
      continue;
    }
    if (shared->live.size() >= limits.max_connections) {
      burst.refused(fmt::format("{} connections is the limit", limits.max_connections), 1);
      ServerStats::add(server_stats().connections_refused);
      continue;  // `socket` closes here
    }
    if (waits_for_members(socket, guard)) {
      asio::co_spawn(executor, admit_when_settled(shared, std::move(socket), table, limits, guard),
                     asio::detached);
      continue;
    }
    if (refuse_stranger(socket, guard)) continue;  // `socket` closes here
    burst.accepted();
    ServerStats::add(server_stats().connections_accepted);
    start_connection(shared, std::move(socket), *table, limits, guard);
  }
}

}  // namespace

struct TcpStoreServer::Impl {
  Impl(asio::io_context& io, StoreLimits limits, StoreGuard guard)
      : io(io),
        limits(limits),
        guard(std::move(guard)),
        store(io.get_executor()),
        shared(std::make_shared<Shared>(io)) {}
  asio::io_context& io;
  StoreLimits limits;
  StoreGuard guard;
  MemoryStore store;
  ServerStats::TableRegistration counted{store.table()};  // keys and waiters in the metrics
  std::shared_ptr<Shared> shared;
  std::uint16_t port = 0;
  bool started = false;
};

TcpStoreServer::TcpStoreServer(asio::io_context& io, const std::string& host, std::uint16_t port,
                               StoreLimits limits, StoreGuard guard)
    : impl_(std::make_unique<Impl>(io, limits, std::move(guard))) {
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
  asio::co_spawn(impl_->io,
                 accept_loop(impl_->shared, &impl_->store.table(), impl_->limits, impl_->guard),
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
std::size_t TcpStoreServer::connection_count() const { return impl_->shared->live.size(); }
std::size_t TcpStoreServer::queued_bytes() const {
  std::size_t total = 0;
  for (const auto& [key, connection] : impl_->shared->live) total += connection->queued_bytes();
  return total;
}

MemoryStore& TcpStoreServer::store() { return impl_->store; }

}  // namespace ddp::rdzv
