// The engine's rules for forming a round (engine/round_forming.hpp) over a scripted backend:
// when a node closes the round, re-counts and gives up, whatever the backend. The scenarios run
// the same rules through both real backends (round_scenarios_test.cpp).

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ddp/error.hpp"
#include "rendezvous/engine/round_forming.hpp"
#include "tests/unit/rendezvous/c10d/c10d_test_util.hpp"
#include "tests/unit/rendezvous/etcd/run_now.hpp"

namespace {

namespace asio = boost::asio;
using ddp::rdzv::Arrivals;
using ddp::rdzv::FormingRound;
using ddp::rdzv::FormingRules;
using ddp::rdzv::RoundSettings;
using ddp::rdzv::test::finish_now;
using FormingClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A backend whose counts say what the test set, and whose round closes `header_after` after
// this node's close (a closer writing the header), or never.
class ScriptedForming final : public FormingRound {
 public:
  explicit ScriptedForming(asio::io_context& io) : io_(io) {}

  asio::awaitable<bool> wait_closed(FormingClock::time_point until) override {
    asio::steady_timer timer(io_, std::min(until, header_at));
    co_await timer.async_wait(asio::use_awaitable);
    co_return FormingClock::now() >= header_at;
  }
  bool recounts(int expected, int arrived_now) const override { return expected > arrived_now; }
  asio::awaitable<Arrivals> count(int expected) override {
    ++counts;
    Arrivals now{arrived, std::nullopt};
    if (recounts(expected, arrived)) now.alive = alive;
    co_return now;
  }
  asio::awaitable<void> close(int size) override {
    closes.push_back(size);
    header_at = std::min(header_at, FormingClock::now() + header_after);
    co_return;
  }
  asio::awaitable<void> throw_if_closed() override { co_return; }
  asio::awaitable<std::vector<std::string>> joined_names(int count) override {
    std::vector<std::string> names;
    for (int i = 0; i < count; ++i) names.push_back("n" + std::to_string(i));
    co_return names;
  }

  int arrived = 0;
  int alive = 0;
  std::chrono::milliseconds header_after{50};
  FormingClock::time_point header_at = FormingClock::time_point::max();
  int counts = 0;
  std::vector<int> closes;

 private:
  asio::io_context& io_;
};

// The scenarios' settings (run "test", join_timeout 5 s) with a 30 ms last call.
RoundSettings forming_settings(int min_nodes, int max_nodes) {
  RoundSettings s = ddp::rdzv::test::fast_settings(min_nodes, max_nodes);
  s.last_call_timeout = 30ms;
  return s;
}

const FormingRules kScriptedRules{
    .backend = "scripted", .round = 1, .progress_period = 20ms, .recount_period = 10ms};

}  // namespace

TEST_CASE("forming rules: the arrival that reaches MAX closes the round at once, counting nothing",
          "[engine][forming]") {
  asio::io_context io;
  ScriptedForming round(io);
  round.arrived = 3;
  round.header_after = 1ms;  // (before the first count, 20 ms on)
  finish_now(io, form_round(round, forming_settings(2, 3), kScriptedRules, 3, 0,
                            FormingClock::now() + 5s));
  CHECK(round.closes == std::vector<int>{3});
  CHECK(round.counts == 0);
}

TEST_CASE("forming rules: the last call closes the round, and a close the header does not follow "
          "is repeated only a whole last call later", "[engine][forming]") {
  asio::io_context io;
  ScriptedForming round(io);
  round.arrived = 2;
  round.header_after = 200ms;  // a closer slow to write the header
  const FormingClock::time_point start = FormingClock::now();
  finish_now(io, form_round(round, forming_settings(2, 4), kScriptedRules, 2, 0, start + 5s));
  // Each close comes a whole last call (30 ms) after the one before, or after the join.
  const auto last_calls = (FormingClock::now() - start) / 30ms;
  REQUIRE_FALSE(round.closes.empty());
  CHECK(static_cast<std::int64_t>(round.closes.size()) <= last_calls);
  CHECK(std::all_of(round.closes.begin(), round.closes.end(), [](int n) { return n == 2; }));
}

TEST_CASE("forming rules: a re-count that finds a predicted member gone closes the round at "
          "the members still alive, before the last call", "[engine][forming]") {
  asio::io_context io;
  ScriptedForming round(io);
  RoundSettings settings = forming_settings(2, 4);
  settings.last_call_timeout = 60s;
  round.arrived = 2;
  round.alive = 2;  // 3 were predicted; one died
  finish_now(io, form_round(round, settings, kScriptedRules, 2, 3, FormingClock::now() + 5s));
  CHECK(round.closes == std::vector<int>{2});
}

TEST_CASE("forming rules: at the deadline the message names the backend, the count and up to "
          "16 of the joined", "[engine][forming]") {
  asio::io_context io;
  ScriptedForming round(io);
  round.arrived = 20;
  std::string message;
  try {
    finish_now(io, form_round(round, forming_settings(30, 30), kScriptedRules, 20, 0,
                              FormingClock::now() + 50ms));
  } catch (const ddp::TimeoutError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::StartsWith("scripted rendezvous run=test round=1 timed out") &&
                          Catch::Contains("20/30 nodes joined (--nnodes 30:30), 10 more needed") &&
                          Catch::Contains("joined: n0, n1,") &&
                          Catch::Contains("n15, and 4 more"));
  CHECK(round.closes.empty());
}
