// Ownership for the etcd rendezvous: the client, the per-round worker store, the lease's revoke
// on the way out. Every node opens a worker store when it joins a round (a listening socket on
// port 0): the node that ends up at group rank 0 is only known once the round closes, and the
// header names its store.

#include "rendezvous/etcd/etcd_backend.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>

#include "common/detached_error.hpp"
#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/engine/round_worker_store.hpp"
#include "rendezvous/etcd/etcd_link_guard.hpp"
#include "rendezvous/etcd/etcd_rendezvous.hpp"
#include "rendezvous/etcd/etcd_tls.hpp"
#include "rendezvous/etcd/etcd_worker_guard.hpp"
#include "rendezvous/net_address.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

namespace ddp::rdzv::etcd {

namespace {

class EtcdBackend final : public Rendezvous {
 public:
  EtcdBackend(boost::asio::io_context& io, const EtcdOptions& options)
      : io_(io), options_(options) {
    ClientOptions client_options;
    client_options.members = options_.members;
    client_options.failover_window = options_.failover_window;
    client_options.attempt_timeout = options_.attempt_timeout;
    // Each agent starts at a member of its own (by pid), so a thousand agents spread their
    // watches and keep-alives over the members' gateways instead of all loading the first.
    client_options.first_member = static_cast<std::size_t>(::getpid());
    if (options_.tls) tls_ = make_tls_context(*options_.tls);
    client_options.tls = tls_;
    client_options.user = options_.user;
    client_options.password = options_.password;
    client_ = std::make_shared<EtcdClient>(io_.get_executor(), client_options);
    const Member& first = options_.members.front();
    self_.addr = options_.local_addr ? *options_.local_addr : route_address(first.host, first.port);
    self_.name = fmt::format("{}_{}", self_.addr, ::getpid());
    self_.addresses = node_addresses();
    self_.rank_hint = options_.rank_hint;
    bind_host_ = wildcard_like(self_.addr);
    // The link store: the members of a round this node hosts hold their leases here, so that
    // it learns of a member's death from its closed connection (etcd_links.hpp).
    links_ = std::make_unique<TcpStoreServer>(io_, bind_host_, 0, StoreLimits{},
                                              link_guard_.guard());
    links_->start();
    self_.link_port = links_->port();
    std::vector<std::string> members;
    for (const Member& m : options_.members) members.push_back(m.to_string());
    logger()->info("etcd rendezvous run={}: this node advertises {} ({}); etcd members {} ({})",
                   options_.settings.run_id, self_.addr,
                   options_.local_addr ? "--local_addr" : "the interface routing to etcd",
                   fmt::join(members, ","), tls_ ? "https" : "http");
    core_ = std::make_unique<EtcdRendezvous>(
        io_.get_executor(), client_, options_.settings, self_,
        [this](int round) {
          link_guard_.open_round();
          return worker_store_.open(round, bind_host_, self_.addr, worker_guard_.open_round());
        },
        &links_->store());
  }

  ~EtcdBackend() override {
    const std::int64_t lease = core_->lease_id();
    core_.reset();
    if (lease != 0) revoke_now(lease);
  }

  asio::awaitable<RendezvousInfo> next_round(int local_world_size) override {
    RendezvousInfo info = co_await core_->next_round(local_world_size);
    // The round's host (group rank 0) serves the workers' store and the members' links.
    std::vector<boost::asio::ip::address> nodes;
    if (info.group_rank == 0 && (worker_guard_.needs_members() || link_guard_.needs_members())) {
      nodes = co_await round_node_addresses(*client_, options_.settings.run_id,
                                            core_->records_round());
    }
    worker_guard_.admit_round(info, nodes);
    link_guard_.admit_round(nodes);
    co_return info;
  }
  asio::awaitable<RoundEvent> watch_round() override { return core_->watch_round(); }
  asio::awaitable<int> report_failure(std::string what) override {
    return core_->report_failure(std::move(what));
  }
  asio::awaitable<std::optional<RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point failed_at) override {
    return core_->failure_verdict(failed_at);
  }
  asio::awaitable<void> finish(bool success) override {
    try {
      co_await core_->finish(success);
    } catch (const IoError& e) {
      // Leaving: an etcd that is gone has nothing left to tell us.
      logger()->warn("etcd: exit barrier skipped: {}", e.what());
    }
  }

 private:
  // The agent's loop has stopped by now: revoke on a private io_context, bounded to one second
  // (the lease would expire on its own a TTL later anyway).
  void revoke_now(std::int64_t lease) {
    boost::asio::io_context private_io;
    ClientOptions o;
    o.members = options_.members;
    o.tls = tls_;
    o.user = options_.user;
    o.password = options_.password;
    o.attempt_timeout = std::chrono::milliseconds(500);
    o.failover_window = std::chrono::milliseconds(1000);
    auto client = std::make_shared<EtcdClient>(private_io.get_executor(), o);
    boost::asio::co_spawn(private_io, client->lease_revoke(lease, o.failover_window),
                          log_if_thrown("rdzv", spdlog::level::debug,
                                        fmt::format("etcd: lease {:x} not revoked", lease)));
    private_io.run_for(std::chrono::milliseconds(1500));
  }

  boost::asio::io_context& io_;
  EtcdOptions options_;
  EtcdNode self_;
  std::string bind_host_;
  std::shared_ptr<TlsContext> tls_;  // https: shared by every connection
  std::shared_ptr<EtcdClient> client_;
  RoundWorkerGuard worker_guard_{options_.worker_store_members_only};
  LinkStoreGuard link_guard_{options_.credentials, options_.worker_store_members_only};
  RoundWorkerStore worker_store_{io_};
  std::unique_ptr<TcpStoreServer> links_;  // for this agent's whole life
  std::unique_ptr<EtcdRendezvous> core_;  // declared last: destroyed before the stores
};

}  // namespace

std::unique_ptr<Rendezvous> make_etcd_rendezvous(const EtcdOptions& options,
                                                 boost::asio::io_context& io) {
  if (options.members.empty()) throw ConfigError("etcd rendezvous: no etcd member given");
  return std::make_unique<EtcdBackend>(io, options);
}

}  // namespace ddp::rdzv::etcd
