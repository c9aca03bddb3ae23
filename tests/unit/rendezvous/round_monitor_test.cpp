// watch_running_round (rendezvous/engine/round_monitor.hpp): the backend's error check it is
// handed is called while the round runs and released once, whether the watch returns, throws or
// loses a race (the etcd backend hands it a check holding its lease).

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>

#include "rendezvous/engine/round_monitor.hpp"

using namespace ddp::rdzv;
using namespace boost::asio::experimental::awaitable_operators;
using namespace std::chrono_literals;

namespace {

// A backend's error check that counts its calls and holds `token` (as etcd's holds its lease).
struct CountedCheck {
  std::shared_ptr<int> token = std::make_shared<int>(7);
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  std::exception_ptr error;

  std::function<std::exception_ptr()> check() const {
    return [token = token, calls = calls, error = error] {
      ++*calls;
      return *token == 7 ? error : std::make_exception_ptr(std::logic_error("token changed"));
    };
  }
};

// Runs `body` on a fresh loop to its end; rethrows what it threw.
void run_on_loop(std::function<asio::awaitable<void>(asio::io_context&)> body) {
  asio::io_context io;
  std::exception_ptr failed;
  asio::co_spawn(io, body(io), [&failed](std::exception_ptr e) { failed = e; });
  io.run();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace

TEST_CASE("a watch that loses a race calls the backend's check and releases it once",
          "[monitor]") {
  CountedCheck backend;
  run_on_loop([&backend](asio::io_context& io) -> asio::awaitable<void> {
    auto monitor = std::make_shared<RoundMonitor>(io.get_executor());
    asio::steady_timer later(io, 20ms);
    auto raced = co_await (watch_running_round(monitor, backend.check()) ||
                           later.async_wait(asio::use_awaitable));
    CHECK(raced.index() == 1);
  });
  CHECK(*backend.calls == 1);
  CHECK(backend.token.use_count() == 1);
}

TEST_CASE("a watch returns the round's change after the backend's check said nothing",
          "[monitor]") {
  CountedCheck backend;
  run_on_loop([&backend](asio::io_context& io) -> asio::awaitable<void> {
    auto monitor = std::make_shared<RoundMonitor>(io.get_executor());
    asio::steady_timer soon(io, 10ms);
    soon.async_wait([monitor](boost::system::error_code) {
      monitor->changes.waiting.push_back("node-c");  // a late node: the round re-forms
      monitor->wake();
    });
    const RoundEvent event = co_await watch_running_round(monitor, backend.check());
    CHECK(event.change == RoundChange::kNodeWaiting);
  });
  CHECK(*backend.calls == 2);  // before the wait and after the wake
  CHECK(backend.token.use_count() == 1);
}

TEST_CASE("a watch throws the backend's error and releases the check once", "[monitor]") {
  CountedCheck backend;
  backend.error = std::make_exception_ptr(std::runtime_error("lease expired"));
  run_on_loop([&backend](asio::io_context& io) -> asio::awaitable<void> {
    auto monitor = std::make_shared<RoundMonitor>(io.get_executor());
    std::string thrown;
    try {
      co_await watch_running_round(monitor, backend.check());
    } catch (const std::runtime_error& e) {
      thrown = e.what();
    }
    CHECK(thrown == "lease expired");
  });
  CHECK(*backend.calls == 1);
  CHECK(backend.token.use_count() == 1);
}
