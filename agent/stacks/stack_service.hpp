#pragma once
// StackService: stacks on demand for one agent. SIGQUIT (kill -QUIT <ddprun pid>) prints every
// worker's stack and the job keeps running; in a multi-node job the request goes through the
// store to every agent and the report gathers all nodes. The service also answers such requests
// from other agents and from ddprun-stacks, and makes the report the hang detector prints. Every
// report goes to stderr, to <run_dir>/stacks_<n>.txt and to the event log ("stacks"). Owned by
// the ElasticAgent; runs on its io_context.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <chrono>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/event_log.hpp"
#include "agent/stacks/stack_collector.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::agent {

class StackService {
 public:
  StackService(boost::asio::io_context& io, EventSink& events, std::string host);
  ~StackService();

  // Starts the SIGQUIT loop and writes the Python hook into `run_dir` (where reports go too).
  // Throws IoError when the hook cannot be written.
  void start(const std::string& run_dir);

  // The workers of the current attempt; an empty list while none run.
  void set_workers(std::vector<StackTarget> workers) { workers_ = std::move(workers); }

  // After each round: publishes the node count in the store at `store_addr:store_port` (the
  // rendezvous store, or the round's; node 0 writes it) and, once per store, starts answering
  // requests there (across nodes, 1 to 2 s later).
  void on_round(const rdzv::RendezvousInfo& info, const std::string& store_addr,
                std::uint16_t store_port);

  // Collects (every node's when `all_nodes` and the round has several), prints, writes and
  // records a report titled by `reason`, with `preface` lines first. Returns the report. Never
  // throws for a worker or node that cannot be read; those are named in the report.
  boost::asio::awaitable<std::string> report(std::string reason, std::vector<std::string> preface,
                                             bool all_nodes);

  // How long a worker may take to give its stack before the report names it as silent.
  static constexpr std::chrono::milliseconds kCollectTimeout{5000};

 private:
  // A store client of the service's, closed when the lease ends. Clients live in clients_, never
  // in coroutine frames: every store client is destroyed before the io_context (as the
  // rendezvous' are), while the frames of detached coroutines go only with the io_context.
  class ClientLease {
   public:
    ClientLease(StackService& service, rdzv::TcpStoreClient* client);
    ~ClientLease();
    ClientLease(const ClientLease&) = delete;
    ClientLease& operator=(const ClientLease&) = delete;
    rdzv::TcpStoreClient* operator->() const { return client_; }
    rdzv::TcpStoreClient* get() const { return client_; }

   private:
    StackService& service_;
    std::shared_ptr<bool> alive_;
    rdzv::TcpStoreClient* client_;
  };

  boost::asio::awaitable<rdzv::TcpStoreClient*> open_store(std::string addr, std::uint16_t port);
  void close_store(rdzv::TcpStoreClient* client);
  boost::asio::awaitable<void> publish_nodes(std::string addr, std::uint16_t port,
                                             std::string run_id, int nodes);
  boost::asio::awaitable<void> answer_loop(std::string addr, std::uint16_t port,
                                           std::string run_id, std::chrono::milliseconds delay);
  boost::asio::awaitable<void> quit_loop();
  boost::asio::awaitable<std::vector<RankStack>> collect_local();
  void record(const std::string& reason, const std::string& text, std::size_t ranks);

  boost::asio::io_context& io_;
  EventSink& events_;
  std::string host_;
  std::string run_dir_;
  boost::asio::signal_set quit_;
  std::vector<StackTarget> workers_;
  rdzv::RendezvousInfo round_;
  std::string store_addr_;
  std::uint16_t store_port_ = 0;
  bool has_round_ = false;
  std::string answering_at_;  // "addr:port/run_id" of the store the answer loop serves
  int reports_ = 0;
  std::shared_ptr<bool> alive_;  // false once destroyed: detached loops check it
  std::list<std::unique_ptr<rdzv::TcpStoreClient>> clients_;
};

}  // namespace ddp::agent
