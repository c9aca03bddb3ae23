// ddp-bench store: N TcpStoreClients on one io_context (one thread) run one operation in a loop
// for S seconds against any TCPStore server, optionally with extra idle connections held open;
// prints ops/s and p50/p99 latency (or one JSON object with --json).
//
// Each client does one operation at a time, as a worker does, so ops/s measures the server's
// round-trip throughput at N outstanding requests. A get is PyTorch's get: WAIT then GET. The
// connect op opens a client (TCP, the dialect's handshake and, with --token_file, ddprun's
// authentication) and closes it, again and again: its latency is a connection's set-up time.
#include <CLI/CLI.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/auth/token_file.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/server_os.hpp"

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ddp::rdzv::Bytes;
using ddp::rdzv::TcpStoreClient;

struct Options {
  std::string addr;
  std::string host;
  std::uint16_t port = 0;
  int clients = 64;
  double seconds = 5;
  std::string op = "set";
  int idle = 0;
  std::string dialect = "2";
  bool json = false;
  std::string token_file;  // authenticate with this secret (docs/security.md)
  std::string run_id = "none";
};

struct Run {
  Clock::time_point stop_at;
  std::vector<std::vector<std::int64_t>> latencies_ns;  // one vector per client
  std::exception_ptr error;
  int running = 0;
};

// Opens `count` connections (at most kInFlight connecting at once, so the server's listen backlog
// is not flooded) and keeps them in `out`, silent: what every waiting worker looks like to the
// store. Each first makes one round trip (the 2.x handshake, or a 1.13 GETNUMKEYS), so that the
// server has accepted and registered all of them before the clock starts.
asio::awaitable<void> open_idle(const Options& o, int count, std::vector<tcp::socket>& out) {
  const bool is_113 = o.dialect == "113";
  const std::vector<std::uint8_t> get_num_keys{0x06};
  const std::vector<std::uint8_t> validate_ping{0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 1, 2, 3, 4};
  const auto& hello = is_113 ? get_num_keys : validate_ping;
  const std::size_t reply_bytes = is_113 ? 8 : 4;
  constexpr int kInFlight = 128;
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  const auto endpoints = co_await resolver.async_resolve(o.host, std::to_string(o.port),
                                                         asio::use_awaitable);
  int next = 0;
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < count) {
      ++next;
      tcp::socket socket(executor);
      co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(hello), asio::use_awaitable);
      std::vector<std::uint8_t> reply(reply_bytes);
      co_await asio::async_read(socket, asio::buffer(reply), asio::use_awaitable);
      out.push_back(std::move(socket));
    }
  };
  int running = kInFlight;
  std::exception_ptr error;
  asio::steady_timer all_done(executor, Clock::time_point::max());  // cancelled by the last one
  for (int i = 0; i < kInFlight; ++i) {
    asio::co_spawn(executor, worker(), [&](std::exception_ptr e) {
      if (e && !error) error = e;
      if (--running == 0) all_done.cancel();
    });
  }
  co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
  if (error) std::rethrow_exception(error);
}

asio::awaitable<void> connect_loop(const Options& o, Run& run,
                                   const ddp::rdzv::ConnectOptions& connect, int index) {
  auto& latencies = run.latencies_ns[static_cast<std::size_t>(index)];
  while (Clock::now() < run.stop_at) {
    const auto start = Clock::now();
    auto client = co_await TcpStoreClient::connect(o.host, o.port, connect);
    latencies.push_back((Clock::now() - start).count());
  }
}

asio::awaitable<void> client_loop(const Options& o, Run& run, TcpStoreClient& client, int index) {
  const std::string own_key = fmt::format("/bench/{}", index);
  const std::string shared_key = "/bench/counter";
  const Bytes value(32, 'x');
  auto& latencies = run.latencies_ns[static_cast<std::size_t>(index)];
  for (std::uint64_t i = 0; Clock::now() < run.stop_at; ++i) {
    const auto start = Clock::now();
    const int op = o.op == "mixed" ? static_cast<int>(i % 3)  // 0 set, 1 get, 2 add
                   : o.op == "set" ? 0
                   : o.op == "get" ? 1
                                   : 2;
    if (op == 0) {
      co_await client.set(own_key, value);
    } else if (op == 1) {
      co_await client.get(own_key);
    } else {
      co_await client.add(shared_key, 1);
    }
    latencies.push_back((Clock::now() - start).count());
  }
}

std::int64_t percentile_us(std::vector<std::int64_t>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000;
}

int bench(const Options& o) {
  const auto fd_limit = ddp::rdzv::raise_fd_limit();
  if (fd_limit < static_cast<std::uint64_t>(o.idle + o.clients + 64)) {
    std::fprintf(stderr, "ddp-bench store: --idle %d needs more file descriptors than %llu\n",
                 o.idle, static_cast<unsigned long long>(fd_limit));
    return 2;
  }
  asio::io_context io;
  ddp::rdzv::ConnectOptions connect;
  connect.connect_timeout = std::chrono::seconds(30);
  connect.call_timeout = std::chrono::seconds(30);
  connect.dialect = o.dialect == "113" ? ddp::rdzv::WireDialect::kTorch113
                                       : ddp::rdzv::WireDialect::kTorch2;
  if (!o.token_file.empty()) {
    connect.credentials = std::make_shared<const ddp::rdzv::auth::Credentials>(
        ddp::rdzv::auth::Credentials{ddp::rdzv::auth::read_token_file(o.token_file,
                                                                      "--token_file"),
                                     o.run_id});
  }
  const bool connects = o.op == "connect";
  std::vector<tcp::socket> idle;
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  Run run;
  run.latencies_ns.resize(static_cast<std::size_t>(o.clients));
  double elapsed_s = 0;

  auto main = [&]() -> asio::awaitable<void> {
    if (o.idle > 0) co_await open_idle(o, o.idle, idle);
    for (int i = 0; i < o.clients && !connects; ++i) {
      clients.push_back(co_await TcpStoreClient::connect(o.host, o.port, connect));
    }
    // Every key a get reads exists before the clock starts.
    for (int i = 0; i < o.clients && !connects; ++i) {
      auto& client = *clients[static_cast<std::size_t>(i)];
      co_await client.set(fmt::format("/bench/{}", i), Bytes(32, 'x'));
    }
    const auto start = Clock::now();
    run.stop_at = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(o.seconds));
    auto executor = co_await asio::this_coro::executor;
    run.running = o.clients;
    asio::steady_timer all_done(executor, Clock::time_point::max());  // cancelled by the last one
    for (int i = 0; i < o.clients; ++i) {
      auto loop = connects ? connect_loop(o, run, connect, i)
                           : client_loop(o, run, *clients[static_cast<std::size_t>(i)], i);
      asio::co_spawn(executor, std::move(loop), [&](std::exception_ptr e) {
        if (e && !run.error) run.error = e;
        if (--run.running == 0) all_done.cancel();
      });
    }
    co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));
    elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  };
  std::exception_ptr error;
  asio::co_spawn(io, main(), [&](std::exception_ptr e) { error = e; });
  io.run();
  if (!error) error = run.error;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddp-bench store: %s\n", e.what());
      return 1;
    }
  }

  std::vector<std::int64_t> all;
  for (auto& v : run.latencies_ns) all.insert(all.end(), v.begin(), v.end());
  const auto ops = all.size();
  const double ops_per_s = static_cast<double>(ops) / elapsed_s;
  const auto p50 = percentile_us(all, 0.50);
  const auto p99 = percentile_us(all, 0.99);
  if (o.json) {
    nlohmann::json j = {{"addr", o.addr},   {"op", o.op},           {"clients", o.clients},
                        {"idle", o.idle},   {"dialect", o.dialect}, {"seconds", elapsed_s},
                        {"ops", ops},       {"ops_per_s", ops_per_s}, {"p50_us", p50},
                        {"p99_us", p99}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("store %s at %s: %d clients, %d idle, dialect %s, %.1fs: %zu ops, %.0f ops/s, "
                "p50 %lld us, p99 %lld us\n",
                o.op.c_str(), o.addr.c_str(), o.clients, o.idle, o.dialect.c_str(), elapsed_s,
                ops, ops_per_s, static_cast<long long>(p50), static_cast<long long>(p99));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("drive a TCPStore server with N clients; print ops/s and p50/p99 latency",
               "ddp-bench store");
  app.add_option("--addr", o.addr, "server address HOST:PORT")->required();
  app.add_option("--clients", o.clients, "concurrent clients, one connection each")
      ->check(CLI::Range(1, 100000));
  app.add_option("--seconds", o.seconds, "measuring time")->check(CLI::PositiveNumber);
  app.add_option("--op", o.op,
                 "set, get (WAIT+GET), add, mixed (set/get/add in turn), or connect (open and "
                 "close a client: the set-up time)")
      ->check(CLI::IsMember({"set", "get", "add", "mixed", "connect"}));
  app.add_option("--token_file", o.token_file,
                 "authenticate with the job secret in this file (ddp-store serve --token_file)");
  app.add_option("--run_id", o.run_id, "the run id the secret is bound to (default none)");
  app.add_option("--idle", o.idle, "extra idle connections held open during the run")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--dialect", o.dialect, "2 (PyTorch 2.x) or 113 (PyTorch 1.13's server)")
      ->check(CLI::IsMember({"2", "113"}));
  app.add_flag("--json", o.json, "print one JSON object (ops_per_s, p50_us, p99_us, ...)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const auto colon = o.addr.rfind(':');
  const int port =
      colon == std::string::npos ? 0 : ddp::parse_number<int>(o.addr.substr(colon + 1)).value_or(0);
  if (colon == std::string::npos || colon == 0 || port < 1 || port > 65535) {
    std::fprintf(stderr, "ddp-bench store: --addr: expected HOST:PORT, got '%s'\n",
                 o.addr.c_str());
    return 2;
  }
  o.host = o.addr.substr(0, colon);
  o.port = static_cast<std::uint16_t>(port);
  return bench(o);
}
