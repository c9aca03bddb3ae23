// ddprun-stacks --rdzv_endpoint H:P --rdzv_id ID: the stack report of a running ddprun job, from
// any machine that reaches its store. Every agent of the job answers with its node's stacks
// (agent/stacks/stack_exchange.hpp); the merged report goes to stdout. Exit 0 with a report (silent
// nodes are named in it), 2 on bad usage, 1 when the store or the job cannot be reached.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "agent/cli/endpoint.hpp"
#include "agent/stacks/stack_exchange.hpp"
#include "agent/stacks/stack_report.hpp"
#include "ddp/error.hpp"
#include "rendezvous/auth/job_credentials.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace {

namespace asio = boost::asio;
using namespace ddp::agent;

asio::awaitable<std::string> ask(std::string host, int port, std::string run_id,
                                 std::chrono::milliseconds timeout) {
  ddp::rdzv::ConnectOptions options;
  options.connect_timeout = timeout;
  options.call_timeout = timeout + std::chrono::seconds(5);
  // A job with a secret, or under SLURM with munge, admits only its own (docs/security.md).
  options.credentials = ddp::rdzv::auth::job_credentials(std::nullopt, run_id);
  auto store = co_await ddp::rdzv::TcpStoreClient::connect(host, static_cast<std::uint16_t>(port),
                                                           options);
  store->set_timeout(timeout);
  const GatheredStacks gathered = co_await request_stacks(*store, run_id, timeout);
  std::vector<std::string> preface;
  for (int node : gathered.silent_nodes) {
    preface.push_back(fmt::format("node {}: no answer (its agent may be gone)", node));
  }
  auto stacks = gathered.stacks;
  std::sort(stacks.begin(), stacks.end(),
            [](const RankStack& a, const RankStack& b) { return a.rank < b.rank; });
  if (stacks.empty()) preface.push_back("no workers are running");
  co_return format_stack_report(
      fmt::format("ddprun stacks (ddprun-stacks) of job {} at {}:{}: {} rank(s) on {} node(s)",
                  run_id, host, port, stacks.size(), gathered.nodes),
      preface, stacks);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddprun-stacks: every worker's stack in a running ddprun job, gathered from every "
               "agent through the job's store."};
  std::string endpoint_text;
  std::string run_id;
  double timeout_s = 10;
  app.add_option("--rdzv_endpoint,--rdzv-endpoint", endpoint_text,
                 "the job's store, host:port (c10d: --rdzv_endpoint; static: "
                 "master_addr:master_port)")
      ->required();
  app.add_option("--rdzv_id,--rdzv-id", run_id, "the job's run id (static default: none)")
      ->required();
  app.add_option("--timeout", timeout_s, "seconds to wait for the agents' answers (default 10)")
      ->check(CLI::Range(0.1, 3600.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::string report;
  try {
    const Endpoint endpoint = parse_endpoint(endpoint_text, std::nullopt, "--rdzv_endpoint");
    if (!endpoint.port) throw ddp::ConfigError("--rdzv_endpoint: a port is required (host:port)");
    asio::io_context io(1);
    std::exception_ptr error;
    asio::co_spawn(io,
                   ask(endpoint.host, *endpoint.port, run_id,
                       std::chrono::milliseconds(static_cast<long>(timeout_s * 1000))),
                   [&](std::exception_ptr e, std::string text) {
                     error = e;
                     report = std::move(text);
                   });
    io.run();
    if (error) std::rethrow_exception(error);
  } catch (const ddp::ConfigError& e) {
    fmt::print(stderr, "ddprun-stacks: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ddprun-stacks: error: {}\n", e.what());
    return 1;
  }
  std::fwrite(report.data(), 1, report.size(), stdout);
  return 0;
}
