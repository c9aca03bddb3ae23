// StackService. SIGQUIT is taken off the forwarded signals: it asks for stacks, as a JVM's thread
// dump does, and never stops the job. The answer loop keeps its own store connection (it sits in
// a wait); each request and each round's node count use a short-lived connection of their own, so
// nothing queues behind the wait.

#include "agent/stacks/stack_service.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "agent/stacks/stack_exchange.hpp"
#include "agent/stacks/stack_hook.hpp"
#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
constexpr auto kStoreTimeout = std::chrono::seconds(10);

asio::awaitable<std::unique_ptr<rdzv::TcpStoreClient>> connect_store(const std::string& addr,
                                                                     std::uint16_t port) {
  rdzv::ConnectOptions options;
  options.connect_timeout = kStoreTimeout;
  options.call_timeout = kStoreTimeout + StackService::kCollectTimeout;
  auto client = co_await rdzv::TcpStoreClient::connect(addr, port, options);
  client->set_timeout(kStoreTimeout);
  co_return client;
}

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", local);
}

}  // namespace

StackService::StackService(asio::io_context& io, EventSink& events, std::string host)
    : io_(io),
      events_(events),
      host_(std::move(host)),
      quit_(io, SIGQUIT),
      alive_(std::make_shared<bool>(true)) {}

StackService::~StackService() {
  *alive_ = false;
  clients_.clear();  // before the io_context, as every store client must be
}

StackService::ClientLease::ClientLease(StackService& service, rdzv::TcpStoreClient* client)
    : service_(service), alive_(service.alive_), client_(client) {}

StackService::ClientLease::~ClientLease() {
  // Frames of detached coroutines are destroyed with the io_context, after the service.
  if (*alive_) service_.close_store(client_);
}

void StackService::start(const std::string& run_dir) {
  run_dir_ = run_dir;
  write_python_hook(run_dir);
  asio::co_spawn(io_, quit_loop(), asio::detached);
}

asio::awaitable<void> StackService::quit_loop() {
  const auto alive = alive_;
  for (;;) {
    boost::system::error_code ec;
    co_await quit_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !*alive) co_return;
    try {
      const std::vector<std::string> no_preface;  // named: see answer_loop on GCC 12
      co_await report("SIGQUIT", no_preface, true);
    } catch (const std::exception& e) {
      log::get("agent")->warn("stack report failed: {}", e.what());
    }
    if (!*alive) co_return;
  }
}

asio::awaitable<std::vector<RankStack>> StackService::collect_local() {
  co_return co_await collect_stacks(workers_, host_, kCollectTimeout);
}

void StackService::on_round(const rdzv::RendezvousInfo& info, const std::string& store_addr,
                            std::uint16_t store_port) {
  round_ = info;
  has_round_ = true;
  store_addr_ = store_addr;
  store_port_ = store_port;
  if (store_addr.empty() || store_port == 0) return;
  const std::string run_id = info.run_id;
  // Every round: this round's node count, for askers to know how many answers to gather (one
  // writer, node 0, so a large job adds one connection, not one per node, as its round closes).
  if (info.group_rank == 0) {
    asio::co_spawn(io_, publish_nodes(store_addr, store_port, run_id, info.group_world_size),
                   log_if_thrown("agent", spdlog::level::debug,
                                 "stack requests: cannot publish the node count"));
  }
  const std::string at = fmt::format("{}:{}/{}", store_addr, store_port, run_id);
  if (at == answering_at_) return;
  answering_at_ = at;
  // Across nodes, each answer loop connects 1 to 2 s after the first round, spread out, so that
  // its connections do not compete with the rendezvous and the workers' own at the store.
  std::chrono::milliseconds delay{0};
  if (info.group_world_size > 1) {
    std::minstd_rand jitter(static_cast<unsigned>(std::random_device{}()));
    delay = std::chrono::milliseconds(1000 + jitter() % 1000);
  }
  // The store host's agent has ended, or the job is over: nothing left to answer.
  asio::co_spawn(io_, answer_loop(store_addr, store_port, run_id, delay),
                 log_if_thrown("agent", spdlog::level::debug, "stack requests: answer loop ended"));
}

asio::awaitable<rdzv::TcpStoreClient*> StackService::open_store(std::string addr,
                                                                std::uint16_t port) {
  auto client = co_await connect_store(addr, port);
  clients_.push_back(std::move(client));
  co_return clients_.back().get();
}

void StackService::close_store(rdzv::TcpStoreClient* client) {
  clients_.remove_if([client](const auto& owned) { return owned.get() == client; });
}

asio::awaitable<void> StackService::publish_nodes(std::string addr, std::uint16_t port,
                                                  std::string run_id, int nodes) {
  const ClientLease store(*this, co_await open_store(addr, port));
  co_await publish_node_count(*store.get(), std::move(run_id), nodes);
}

asio::awaitable<void> StackService::answer_loop(std::string addr, std::uint16_t port,
                                                std::string run_id,
                                                std::chrono::milliseconds delay) {
  if (delay.count() > 0) {
    asio::steady_timer timer(io_, delay);
    co_await timer.async_wait(asio::use_awaitable);
  }
  const ClientLease store(*this, co_await open_store(addr, port));
  store->set_timeout(std::chrono::hours(24));
  // Named, not temporaries of the co_await expression: GCC 12 destroys such temporaries twice
  // (here: the lambda's shared_ptr released twice, the heap corrupted at exit).
  const std::function<int()> node = [this] { return round_.group_rank; };
  const CollectNodeStacks collect = [this,
                                     alive = alive_]() -> asio::awaitable<std::vector<RankStack>> {
    if (!*alive) co_return std::vector<RankStack>{};
    auto stacks = co_await collect_local();
    record("request", encode_node_stacks(round_.group_rank, host_, stacks), stacks.size());
    co_return stacks;
  };
  co_await answer_stack_requests(*store.get(), run_id, node, host_, collect);
}

asio::awaitable<std::string> StackService::report(std::string reason,
                                                  std::vector<std::string> preface,
                                                  bool all_nodes) {
  const auto alive = alive_;
  std::vector<RankStack> stacks;
  int nodes = 1;
  bool gathered = false;
  if (all_nodes && has_round_ && round_.group_world_size > 1 && store_port_ != 0) {
    try {
      const ClientLease store(*this, co_await open_store(store_addr_, store_port_));
      const auto result = co_await request_stacks(*store.get(), round_.run_id,
                                                  kCollectTimeout + std::chrono::seconds(3));
      stacks = result.stacks;
      nodes = result.nodes;
      for (int node : result.silent_nodes) {
        preface.push_back(fmt::format("node {}: no answer (its agent may be gone)", node));
      }
      gathered = true;
    } catch (const std::exception& e) {
      log::get("agent")->warn("stack request through the store failed ({}); this node only",
                              e.what());
    }
  }
  if (!gathered) stacks = co_await collect_local();
  if (!*alive) co_return std::string{};
  std::sort(stacks.begin(), stacks.end(),
            [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
  const std::string title =
      fmt::format("ddprun stacks ({}) at {}: {} rank(s) on {} node(s), reported by {}", reason,
                  now_text(), stacks.size(), nodes, host_);
  if (stacks.empty()) preface.push_back("no workers are running");
  const std::string text = format_stack_report(title, preface, stacks);
  std::fflush(stdout);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  record(reason, text, stacks.size());
  co_return text;
}

void StackService::record(const std::string& reason, const std::string& text,
                          std::size_t ranks) {
  std::string path;
  if (!run_dir_.empty()) {
    const bool answer = reason == "request";
    path = (std::filesystem::path(run_dir_) /
            fmt::format("{}_{}.{}", answer ? "stack_answer" : "stacks", reports_++,
                        answer ? "json" : "txt"))
               .string();
    // Whole or not at all: a reader that finds the file (a script waiting for the report) never
    // reads it half written.
    const std::string partial = path + ".partial";
    std::ofstream(partial) << text;
    std::error_code ignored;
    std::filesystem::rename(partial, path, ignored);
  }
  events_.emit(Event("stacks")
                   .with("reason", reason)
                   .with("ranks", static_cast<std::int64_t>(ranks))
                   .with("path", path));
}

}  // namespace ddp::agent
