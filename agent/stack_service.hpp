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
#include <memory>
#include <string>
#include <vector>

#include "agent/event_log.hpp"
#include "agent/stack_collector.hpp"
#include "rendezvous/rendezvous.hpp"

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

  // After each round: publishes the node count and, once per store, starts answering requests.
  void on_round(const rdzv::RendezvousInfo& info);

  // Collects (every node's when `all_nodes` and the round has several), prints, writes and
  // records a report titled by `reason`, with `preface` lines first. Returns the report. Never
  // throws for a worker or node that cannot be read; those are named in the report.
  boost::asio::awaitable<std::string> report(std::string reason, std::vector<std::string> preface,
                                             bool all_nodes);

  // How long a worker may take to give its stack before the report names it as silent.
  static constexpr std::chrono::milliseconds kCollectTimeout{5000};

 private:
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
  bool has_round_ = false;
  std::string answering_at_;  // "addr:port/run_id" of the store the answer loop serves
  int reports_ = 0;
  std::shared_ptr<bool> alive_;  // false once destroyed: detached loops check it
};

}  // namespace ddp::agent
