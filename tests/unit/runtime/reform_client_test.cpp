// ddp::ReformClient against a scripted agent (scripted_reform_agent.hpp).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/reform_protocol.hpp"
#include "ddp/error.hpp"
#include "ddp/reform_client.hpp"
#include "tests/unit/runtime/scripted_reform_agent.hpp"

namespace {

using namespace std::chrono_literals;
using ddp::test::ScriptedAgent;

}  // namespace

TEST_CASE("the client says hello, takes places newer than its round and reports reformed",
          "[reform]") {
  ScriptedAgent agent;
  ddp::ReformClient client(agent.address(), 2, 10s, nullptr);
  agent.accept();
  const auto hello = ddp::reform::parse_worker_line(agent.read_line());
  CHECK(hello.kind == ddp::reform::WorkerLine::Kind::kHello);
  CHECK(hello.local_rank == 2);
  CHECK(hello.pid == ::getpid());
  agent.send_place(0, "5");
  const ddp::ReformPlace first = client.wait_newer_than(-1);
  CHECK(first.round == 0);
  CHECK(first.env.at("RANK") == "5");
  CHECK_FALSE(client.newer_than(0).has_value());
  client.reformed(0);
  CHECK(agent.read_line() == "reformed 0");
  agent.send_place(1, "3");
  const ddp::ReformPlace second = client.wait_newer_than(0);
  CHECK(second.round == 1);
  CHECK(client.newer_than(0).has_value());
  CHECK_FALSE(client.newer_than(1).has_value());
}

TEST_CASE("a place the training thread does not take within the grace calls the handler once",
          "[reform]") {
  ScriptedAgent agent;
  std::promise<int> overdue;
  std::atomic<int> calls{0};
  ddp::ReformClient client(agent.address(), 0, 50ms, [&](int round) {
    if (calls++ == 0) overdue.set_value(round);
    return false;
  });
  agent.accept();
  agent.read_line();
  agent.send_place(4, "0");
  auto future = overdue.get_future();
  REQUIRE(future.wait_for(10s) == std::future_status::ready);
  CHECK(future.get() == 4);
  CHECK(client.wait_newer_than(3).round == 4);
  CHECK(calls.load() == 1);
}

TEST_CASE("issue 29: an overdue handler that freed the training thread gets another grace",
          "[reform]") {
  ScriptedAgent agent;
  std::promise<void> second;
  std::atomic<int> calls{0};
  ddp::ReformClient client(agent.address(), 0, 30ms, [&](int round) {
    CHECK(round == 2);
    const int call = ++calls;
    if (call == 2) second.set_value();
    return call == 1;  // the first call aborted a group; the second gives up
  });
  agent.accept();
  agent.read_line();
  agent.send_place(2, "0");
  REQUIRE(second.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(client.wait_newer_than(1).round == 2);
  CHECK(calls.load() == 2);
}

TEST_CASE("issue 29: the place handler sees each newer place on arrival, once", "[reform]") {
  ScriptedAgent agent;
  std::mutex mutex;
  std::condition_variable seen_changed;
  std::vector<int> seen;
  ddp::ReformClient client(agent.address(), 0, 10s, nullptr, [&](const ddp::ReformPlace& p) {
    std::lock_guard lock(mutex);
    seen.push_back(p.round);
    seen_changed.notify_all();
  });
  agent.accept();
  agent.read_line();
  agent.send_place(1, "0");
  agent.send_place(1, "0");  // not newer: no call
  agent.send_place(0, "0");  // older: no call
  agent.send_place(3, "2");
  std::unique_lock lock(mutex);
  REQUIRE(seen_changed.wait_for(lock, 10s, [&] { return seen.size() >= 2; }));
  CHECK(seen == std::vector<int>{1, 3});
  lock.unlock();
  CHECK(client.wait_newer_than(-1).round == 3);  // taken or not, the training thread sees it
}

TEST_CASE("a place taken in time is never overdue", "[reform]") {
  ScriptedAgent agent;
  std::atomic<int> calls{0};
  ddp::ReformClient client(agent.address(), 0, 10s, [&](int) { return ++calls < 0; });
  agent.accept();
  agent.read_line();
  agent.send_place(0, "0");
  CHECK(client.wait_newer_than(-1).round == 0);
  CHECK(calls.load() == 0);
}

TEST_CASE("the agent hanging up fails the waits with IoError", "[reform]") {
  ScriptedAgent agent;
  ddp::ReformClient client(agent.address(), 0, 10s, nullptr);
  agent.accept();
  agent.read_line();
  agent.hang_up();
  CHECK_THROWS_AS(client.wait_newer_than(-1), ddp::IoError);
  CHECK_THROWS_AS(client.newer_than(-1), ddp::IoError);
}

TEST_CASE("a channel nobody listens at is an IoError naming it", "[reform]") {
  CHECK_THROWS_WITH(ddp::ReformClient("@ddp-reform-test-nobody-here", 0, 1s, nullptr),
                    Catch::Contains("ddp-reform-test-nobody-here"));
}

namespace {

// The round of each overdue call, as they come, for waiting on them with a bound.
struct OverdueCalls {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> rounds;

  ddp::ReformClient::OverdueHandler handler() {
    return [this](int round) {
      std::lock_guard lock(mutex);
      rounds.push_back(round);
      changed.notify_all();
      return false;
    };
  }
  bool called_within(std::chrono::milliseconds bound) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, bound, [&] { return !rounds.empty(); });
  }
};

// The worker says hello and its training thread takes the place of round 0.
void take_first_place(ScriptedAgent& agent, ddp::ReformClient& client) {
  agent.accept();
  agent.read_line();
  agent.send_place(0, "0");
  CHECK(client.wait_newer_than(-1).round == 0);
}

}  // namespace

TEST_CASE("issue 34: a place for a thread silent past the grace since its commit is due at once",
          "[reform]") {
  ScriptedAgent agent;
  OverdueCalls overdue;
  ddp::ReformClient client(agent.address(), 0, 1s, overdue.handler());
  take_first_place(agent, client);
  client.progressed();  // it trains, and then blocks in a collective with a cut peer
  std::this_thread::sleep_for(1100ms);
  agent.send_place(1, "0");
  // Counted from the arrival it would wait another second; from the commit it is due now.
  REQUIRE(overdue.called_within(600ms));
  CHECK(overdue.rounds == std::vector<int>{1});
}

TEST_CASE("issue 34: a place arriving while the thread forms its group waits a grace from then",
          "[reform]") {
  ScriptedAgent agent;
  OverdueCalls overdue;
  ddp::ReformClient client(agent.address(), 0, 1s, overdue.handler());
  take_first_place(agent, client);
  std::this_thread::sleep_for(1100ms);  // still joining round 0: no commit since the place
  agent.send_place(1, "0");
  CHECK_FALSE(overdue.called_within(600ms));
  REQUIRE(overdue.called_within(10s));
  CHECK(overdue.rounds == std::vector<int>{1});
}
