// ElasticAgent while a failure verdict waits on a peer that never answers (as the etcd verdict
// waits out a frozen peer's lease): a signal ends the agent at once and spends no restart.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "agent/elastic/elastic_agent.hpp"
#include "tests/unit/agent/core/elastic_agent_test_util.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using rdzv::test::run_until;
using rdzv::test::spawn;
using test::FakeLauncher;
using test::FakeOutcome;
using test::field;
using test::RecordingEventSink;
using test::TempDir;

// Two nodes in one round, the other of which never answers: watch_round and failure_verdict wait
// until cancelled.
class SilentPeerRendezvous final : public rdzv::Rendezvous {
 public:
  asio::awaitable<rdzv::RendezvousInfo> next_round(int local_world_size) override {
    rdzv::RendezvousInfo info;
    info.run_id = "test";
    info.group_world_size = 2;
    info.world_size = 2 * local_world_size;
    co_return info;
  }
  asio::awaitable<rdzv::RoundEvent> watch_round() override {
    co_await forever();
    co_return rdzv::RoundEvent{rdzv::RoundChange::kPeerFailed, "cancelled"};
  }
  asio::awaitable<int> report_failure(std::string) override { co_return ++reported; }
  asio::awaitable<std::optional<rdzv::RoundEvent>> failure_verdict(
      std::chrono::steady_clock::time_point) override {
    in_verdict = true;
    co_await forever();
    co_return std::nullopt;
  }
  asio::awaitable<void> finish(bool) override { co_return; }

  bool in_verdict = false;
  int reported = 0;

 private:
  static asio::awaitable<void> forever() {
    asio::steady_timer timer(co_await asio::this_coro::executor,
                             std::chrono::steady_clock::time_point::max());
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
};

TEST_CASE("a signal during the failure verdict ends the agent at once, spending no restart",
          "[elastic_agent]") {
  TempDir logs;
  const LaunchConfig config = test::agent_config(logs, 1, 3);
  asio::io_context io;
  SilentPeerRendezvous rendezvous;
  RecordingEventSink events;
  FakeLauncher launcher({{FakeOutcome::exits(3, 10ms)}});
  ElasticAgent agent(io, agent_spec(config, {}), rendezvous, events, launcher);
  auto run = spawn(io, agent.run());
  REQUIRE(run_until(io, [&] { return rendezvous.in_verdict; }));
  ::raise(SIGTERM);
  REQUIRE(run_until(io, [&] { return run->done; }));

  CHECK(run->get() == 128 + SIGTERM);
  CHECK(rendezvous.reported == 0);
  CHECK(launcher.launched.size() == 1);
  CHECK(events.names() == std::vector<std::string>{"rendezvous", "workers_started", "worker_exited",
                                                   "workers_stopped", "finish"});
  CHECK(field<std::string>(events.named("workers_stopped")[0], "reason") == "failure");
  CHECK(field<std::string>(events.events.back(), "reason") == "signal");
}

}  // namespace
}  // namespace ddp::agent
