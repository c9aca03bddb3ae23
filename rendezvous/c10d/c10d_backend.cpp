// Ownership and hosting for the c10d rendezvous. The store host is an ordinary member (group
// rank 0) whose store lives in-process; every other node holds three client connections (calls,
// its lease, the change log's wait). Store errors surface as IoError naming the endpoint, so
// "the store host is gone" reads as such.

#include "rendezvous/c10d/c10d_backend.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/unique_fd.hpp"
#include "ddp/error.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_worker_store.hpp"
#include "rendezvous/net_address.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store_client/lease_holder.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

namespace ddp::rdzv {

namespace {

// True when binding host:port fails because the address is in use (port 0 is never taken). A
// bare socket: every agent but one on a machine asks, and an io_context for one bind would cost
// each of them an epoll instance, an eventfd and a timerfd.
bool port_is_taken(const std::string& host, std::uint16_t port) {
  if (port == 0) return false;
  const boost::asio::ip::tcp::endpoint endpoint(asio::ip::make_address(host), port);
  const UniqueFd fd(::socket(endpoint.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return false;
  const int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  return ::bind(fd.get(), endpoint.data(), static_cast<socklen_t>(endpoint.size())) != 0 &&
         errno == EADDRINUSE;
}

class C10dBackend final : public Rendezvous {
 public:
  C10dBackend(boost::asio::io_context& io, const C10dOptions& options)
      : io_(io), options_(options), guards_(options.security) {
    C10dSettings& s = options_.settings;
    bind_host_ = wildcard_like(options_.endpoint_host);
    const bool want_host = options_.is_host.value_or(is_local_host(options_.endpoint_host));
    if (want_host && !options_.is_host && port_is_taken(bind_host_, options_.endpoint_port)) {
      // Another agent on this machine hosts it already (many agents on one host): be a client
      // without the server's costly search for the port's owner.
      logger()->info("c10d: port {} is taken on this machine; joining as a client",
                     options_.endpoint_port);
    } else if (want_host) {
      try {
        server_ = std::make_unique<TcpStoreServer>(io_, bind_host_, options_.endpoint_port,
                                                   StoreLimits{}, guards_.rendezvous_store());
        server_->start();
      } catch (const IoError& e) {
        if (options_.is_host) throw;  // is_host=1 was asked for: no fallback
        logger()->info("c10d: not hosting the store ({}); joining as a client", e.what());
        server_.reset();
      }
    }
    if (!server_ && options_.endpoint_port == 0) {
      throw ConfigError(fmt::format("--rdzv_endpoint {}:0 needs this node to host the store",
                                    options_.endpoint_host));
    }
    s.store_host = options_.endpoint_host;
    s.store_port = server_ ? server_->port() : options_.endpoint_port;
    self_.is_host = server_ != nullptr;
    self_.rank_hint = options_.rank_hint;
    self_.addr = options_.local_addr ? *options_.local_addr
                                     : route_address(options_.endpoint_host, s.store_port);
    self_.name = fmt::format("{}_{}", self_.addr, ::getpid());
    if (server_) {
      s.store_host = self_.addr;
      logger()->info("c10d rendezvous run={}: this node ({}) hosts the store on {}:{}{}", s.run_id,
                     self_.addr, bind_host_, s.store_port,
                     guards_.security().credentials ? " (agents authenticate)" : "");
      if (!guards_.security().credentials) {
        warn_open_store("the c10d rendezvous store", self_.addr, s.store_port);
      }
    } else {
      logger()->info("c10d rendezvous run={}: this node advertises {} ({}); store at {}:{}",
                     s.run_id, self_.addr,
                     options_.local_addr ? "--local_addr" : "the interface routing to the store",
                     options_.endpoint_host, s.store_port);
    }
  }

  asio::awaitable<RendezvousInfo> next_round(int local_world_size) override {
    if (!core_) co_await naming_store(connect());
    co_return co_await naming_store(core_->next_round(local_world_size));
  }

  asio::awaitable<RoundEvent> watch_round() override {
    if (!core_) throw InternalError("c10d watch_round before next_round");
    return naming_store(core_->watch_round());
  }

  asio::awaitable<int> report_failure(std::string what) override {
    if (!core_) co_await connect();
    co_return co_await naming_store(core_->report_failure(std::move(what)));
  }

  asio::awaitable<std::optional<RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point failed_at) override {
    if (!core_) co_return std::nullopt;
    co_return co_await naming_store(core_->failure_verdict(failed_at));
  }

  asio::awaitable<void> finish(bool success) override {
    if (!core_) co_return;
    try {
      co_await core_->finish(success);
    } catch (const IoError& e) {
      // Leaving: a store that is gone has nothing left to tell us.
      logger()->warn("c10d: exit barrier skipped: {}", store_gone(e).what());
    }
  }

 private:
  asio::awaitable<void> connect() {
    const C10dSettings& s = options_.settings;
    Store* store = nullptr;
    if (server_) {
      store = &server_->store();
    } else {
      ConnectOptions connect_options;
      connect_options.connect_timeout = s.join_timeout;
      connect_options.call_timeout = options_.read_timeout;
      // Agents usually start together and the host may bind a moment after its clients try:
      // retry often (the client adds jitter), so nobody sleeps through the round.
      connect_options.max_backoff = std::chrono::milliseconds(200);
      connect_options.credentials = guards_.security().credentials;
      // The host's workers' stores admit every address this node holds (docs/security.md).
      connect_options.report_addresses = true;
      client_ = co_await TcpStoreClient::connect(options_.endpoint_host, s.store_port,
                                                 connect_options);
      client_->set_timeout(options_.read_timeout);
      store = client_.get();
      // A connection that only holds this node's lease: when this process dies, the kernel
      // closes it and the store declares the node lost after the grace (store_lease.hpp).
      lease_client_ = co_await TcpStoreClient::connect(options_.endpoint_host, s.store_port,
                                                       connect_options);
      lease_holder_ = std::make_unique<LeaseHolder>(
          io_.get_executor(), *lease_client_,
          c10d_keys::full_lease_base(s.run_id, self_.name));
      // A connection for the monitor's wait on the round's change log, parked for the whole
      // round: the store tells every member of a change at once, and nobody polls.
      watch_client_ = co_await TcpStoreClient::connect(options_.endpoint_host, s.store_port,
                                                       connect_options);
    }
    WorkerStoreOpener opener;
    if (server_) {
      opener = [this](int round) {
        return worker_store_.open(round, bind_host_, self_.addr, guards_.worker_store());
      };
    }
    core_ = std::make_unique<C10dRendezvous>(io_.get_executor(), *store, s, self_,
                                             std::move(opener));
    // In-process, a parked wait holds nothing up.
    core_->watch_changes_on(watch_client_ ? static_cast<Store&>(*watch_client_) : *store);
  }

  // `op`, its IoError said as the store's being gone.
  template <typename T>
  asio::awaitable<T> naming_store(asio::awaitable<T> op) {
    try {
      co_return co_await std::move(op);
    } catch (const IoError& e) {
      throw store_gone(e);
    }
  }

  IoError store_gone(const IoError& e) const {
    return IoError(fmt::format(
        "c10d rendezvous store at {}:{} is unreachable (its host agent exited or the link is "
        "down): {}", options_.endpoint_host, options_.settings.store_port, e.what()));
  }

  boost::asio::io_context& io_;
  C10dOptions options_;
  JobGuards guards_;  // before the stores, which hold its member list
  C10dNode self_;
  std::string bind_host_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
  // The holder is destroyed (stopped) before its client, whose destruction ends its wait.
  std::unique_ptr<TcpStoreClient> lease_client_;
  std::unique_ptr<TcpStoreClient> watch_client_;  // the change log's wait
  std::unique_ptr<LeaseHolder> lease_holder_;
  RoundWorkerStore worker_store_{io_};
  std::unique_ptr<C10dRendezvous> core_;  // declared last: destroyed before the stores
};

}  // namespace

std::unique_ptr<Rendezvous> make_c10d_rendezvous(const C10dOptions& options,
                                                 boost::asio::io_context& io) {
  return std::make_unique<C10dBackend>(io, options);
}

}  // namespace ddp::rdzv
