// StaticRendezvous with real nodes in one process: node 0 hosts the store on a free port, the
// others connect over loopback. Everything runs on one io_context, as in the agent.

#include <catch2/catch.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <stdexcept>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include <fmt/format.h>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/static/static_rendezvous.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::rdzv {
namespace {

using namespace boost::asio::experimental::awaitable_operators;
using std::chrono::milliseconds;

StaticRendezvousOptions node_options(int nnodes, int rank, std::uint16_t port) {
  StaticRendezvousOptions options;
  options.run_id = "test";
  options.nnodes = nnodes;
  options.node_rank = rank;
  options.master_port = port;
  options.timeout = std::chrono::seconds(10);
  options.leave_timeout = std::chrono::seconds(5);
  options.max_restarts = 1;
  options.node_name = "node" + std::to_string(rank);
  return options;
}

// Two nodes of a job with --max_restarts=0: the first failure ends it.
struct JobWithoutRestarts {
  static StaticRendezvousOptions without_restarts(StaticRendezvousOptions options) {
    options.max_restarts = 0;
    return options;
  }
  boost::asio::io_context io;
  StaticRendezvous host{io, without_restarts(node_options(2, 0, 0))};
  StaticRendezvous other{io, without_restarts(node_options(2, 1, host.store_port()))};
};

// Runs `body` on a fresh io_context until it completes; rethrows what it threw.
template <typename Body>
void run(boost::asio::io_context& io, Body body) {
  std::exception_ptr error;
  bool done = false;
  boost::asio::co_spawn(io, body(), [&](std::exception_ptr e) {
    error = e;
    done = true;
    io.stop();
  });
  io.run_for(std::chrono::seconds(30));
  REQUIRE(done);
  if (error) std::rethrow_exception(error);
}

TEST_CASE("one node gets a free port and a watch that only ends when cancelled", "[static]") {
  boost::asio::io_context io;
  StaticRendezvous node(io, node_options(1, 0, 0));
  CHECK(node.store_port() != 0);
  run(io, [&]() -> asio::awaitable<void> {
    const auto info = co_await node.next_round(4);
    CHECK(info.world_size == 4);
    CHECK(info.rank_base == 0);
    CHECK(info.master_port == node.store_port());
    CHECK(info.restart_count == 0);
    boost::asio::steady_timer timer(io, milliseconds(20));
    auto raced = co_await (node.watch_round() || timer.async_wait(asio::use_awaitable));
    CHECK(raced.index() == 1);
    const int first = co_await node.report_failure("rank 0 exited with 1");
    CHECK(first == 1);
    const auto again = co_await node.next_round(4);
    CHECK(again.restart_count == 1);
    const int second = co_await node.report_failure("rank 0 exited with 1");
    CHECK(second == 2);
    CHECK_THROWS_AS(co_await node.next_round(4), RendezvousClosedError);
  });
}

TEST_CASE("a node's entry in a round has one byte form", "[static]") {
  // Nodes of one job may run different ddprun builds: the form is fixed (keys sorted).
  boost::asio::io_context io;
  StaticRendezvous node(io, node_options(1, 0, 0));
  run(io, [&]() -> asio::awaitable<void> {
    co_await node.next_round(4);
    ConnectOptions options;
    options.connect_timeout = std::chrono::seconds(5);
    auto client = co_await TcpStoreClient::connect("127.0.0.1", node.store_port(), options);
    const Bytes entry = co_await client->get("/ddprun/test/round/0/node/0");
    CHECK(to_string(entry) == R"({"host":"node0","local_world_size":4,"version":1})");
  });
}

TEST_CASE("a taken port is an error naming it", "[static]") {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor taken(io, {boost::asio::ip::tcp::v4(), 0});
  const auto port = taken.local_endpoint().port();
  CHECK_THROWS_WITH(StaticRendezvous(io, node_options(1, 0, port)),
                    Catch::Contains(std::to_string(port)));
}

TEST_CASE("two nodes get contiguous ranks, restart together and pass the exit barrier",
          "[static]") {
  boost::asio::io_context io;
  StaticRendezvous host(io, node_options(2, 0, 0));
  StaticRendezvous other(io, node_options(2, 1, host.store_port()));
  run(io, [&]() -> asio::awaitable<void> {
    auto infos = co_await (host.next_round(2) && other.next_round(3));
    const auto& [h, o] = infos;
    CHECK(h.group_rank == 0);
    CHECK(o.group_rank == 1);
    CHECK(h.world_size == 5);
    CHECK(o.world_size == 5);
    CHECK(h.rank_base == 0);
    CHECK(o.rank_base == 2);
    CHECK(o.node_names == std::vector<std::string>{"node0", "node1"});
    CHECK(o.master_port == host.store_port());

    // A failure on node 1 ends node 0's round; one restart is spent for the job.
    auto failed = co_await (host.watch_round() && other.report_failure("rank 3 exited with 5"));
    CHECK(std::get<0>(failed).change == RoundChange::kPeerFailed);
    CHECK(std::get<0>(failed).detail.find("rank 3 exited with 5") != std::string::npos);
    CHECK(std::get<1>(failed) == 1);

    auto next = co_await (host.next_round(2) && other.next_round(3));
    CHECK(std::get<0>(next).restart_count == 1);
    CHECK(std::get<1>(next).restart_count == 1);
    co_await (host.finish(true) && other.finish(true));
  });
}

TEST_CASE("when the restarts are spent the other node's next round is closed", "[static]") {
  JobWithoutRestarts job;
  auto& [io, host, other] = job;
  run(io, [&]() -> asio::awaitable<void> {
    co_await (host.next_round(1) && other.next_round(1));
    auto watched = co_await (other.watch_round() && host.report_failure("rank 0 exited with 2"));
    CHECK(std::get<1>(watched) == 1);
    bool closed = false;
    try {
      co_await (host.finish(false) && other.next_round(1));
    } catch (const RendezvousClosedError&) {
      closed = true;
    }
    CHECK(closed);
  });
}

TEST_CASE("a failure that spends the last restart closes the job before it wakes other nodes",
          "[static]") {
  JobWithoutRestarts job;
  auto& [io, host, other] = job;
  run(io, [&]() -> asio::awaitable<void> {
    co_await (host.next_round(1) && other.next_round(1));
    // Node 1 has not reached finish(false) yet (it is still writing its report): node 0 already
    // learns from the store that the job ended there, and why.
    auto watched = co_await (host.watch_round() && other.report_failure("rank 1 exited with 5"));
    CHECK(std::get<1>(watched) == 1);
    std::string message;
    try {
      co_await host.next_round(1);
    } catch (const RendezvousClosedError& e) {
      message = e.what();
    }
    CHECK_THAT(message, Catch::Contains("the job ended on another node: node 1 (node1): rank 1 "
                                        "exited with 5"));
    co_await other.finish(false);
  });
}

// The error text of an operation that must fail, or "" when it succeeded.
template <typename T>
asio::awaitable<std::string> error_of(asio::awaitable<T> op) {
  try {
    co_await std::move(op);
  } catch (const std::exception& e) {
    co_return e.what();
  }
  co_return "";
}

TEST_CASE("a lost node ends a static job naming it, and a failure after it is the loss",
          "[static][loss]") {
  boost::asio::io_context io;
  auto options = [](int rank, std::uint16_t port) {
    auto o = node_options(3, rank, port);
    o.connection_grace = milliseconds(20);
    o.verdict_margin = std::chrono::seconds(5);  // a bound: the verdict returns when it knows
    return o;
  };
  StaticRendezvous host(io, options(0, 0));
  StaticRendezvous one(io, options(1, host.store_port()));
  auto two = std::make_unique<StaticRendezvous>(io, options(2, host.store_port()));
  run(io, [&]() -> asio::awaitable<void> {
    co_await (host.next_round(1) && one.next_round(1) && two->next_round(1));
    two.reset();  // its agent dies: its lease connection closes
    const RoundEvent watched = co_await host.watch_round();
    CHECK(watched.change == RoundChange::kNodeLost);
    CHECK_THAT(watched.detail, Catch::Contains("node 2 (node2) was lost"));
    REQUIRE(watched.lost.size() == 1);
    CHECK(watched.lost[0].detected_by == "connection");
    // Node 1's workers failed because node 2's died: the verdict is the loss.
    const auto verdict = co_await one.failure_verdict(std::chrono::steady_clock::now());
    REQUIRE(verdict.has_value());
    CHECK(verdict->change == RoundChange::kNodeLost);
    // The job is over for both, naming the node; the host does not wait for node 2 to leave.
    const auto errors = co_await (error_of(host.next_round(1)) && error_of(one.next_round(1)));
    CHECK_THAT(std::get<0>(errors), Catch::Contains("node 2 (node2) was lost"));
    CHECK_THAT(std::get<1>(errors), Catch::Contains("node 2 (node2) was lost"));
  });
}

TEST_CASE("a static failure with every node alive has no loss verdict", "[static][loss]") {
  boost::asio::io_context io;
  auto options = node_options(2, 0, 0);
  options.verdict_margin = milliseconds(20);
  StaticRendezvous host(io, options);
  options = node_options(2, 1, host.store_port());
  options.verdict_margin = milliseconds(20);
  StaticRendezvous other(io, options);
  run(io, [&]() -> asio::awaitable<void> {
    co_await (host.next_round(1) && other.next_round(1));
    const auto verdict = co_await other.failure_verdict(std::chrono::steady_clock::now());
    CHECK_FALSE(verdict.has_value());
    co_await (host.finish(false) && other.finish(false));
  });
}

TEST_CASE("a node that never comes is named", "[static]") {
  boost::asio::io_context io;
  auto options = node_options(2, 0, 0);
  options.timeout = milliseconds(300);
  StaticRendezvous host(io, options);
  run(io, [&]() -> asio::awaitable<void> {
    bool timed_out = false;
    try {
      co_await host.next_round(1);
    } catch (const TimeoutError& e) {
      timed_out = true;
      CHECK(std::string(e.what()).find("node(s) 1 of --nnodes=2 did not join") !=
            std::string::npos);
    }
    CHECK(timed_out);
  });
}

// Copies what the "rdzv" logger writes at warning level or above (what a quiet run shows).
struct CapturedWarnings {
  std::ostringstream text;
  std::shared_ptr<spdlog::logger> logger = log::get("rdzv");
  CapturedWarnings() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
    sink->set_level(spdlog::level::warn);
    logger->sinks().push_back(sink);
  }
  ~CapturedWarnings() { logger->sinks().pop_back(); }
};

TEST_CASE("issue 21: while nodes are missing, the store host says which, at warning level",
          "[static]") {
  boost::asio::io_context io;
  auto options = node_options(3, 0, 0);
  options.timeout = milliseconds(400);
  options.progress_interval = milliseconds(50);
  StaticRendezvous host(io, options);
  StaticRendezvous node1(io, node_options(3, 1, host.store_port()));
  CapturedWarnings captured;
  run(io, [&]() -> asio::awaitable<void> {
    using namespace boost::asio::experimental::awaitable_operators;
    bool timed_out = false;
    try {
      co_await (host.next_round(1) && node1.next_round(1));
    } catch (const std::exception&) {  // both time out: Asio's multiple_exceptions
      timed_out = true;
    }
    CHECK(timed_out);
  });
  const std::string text = captured.text.str();
  CHECK_THAT(text, Catch::Contains("waiting for the nodes of --nnodes=3 to join round 0"));
  CHECK_THAT(text, Catch::Contains("(missing node_rank 2)"));
  CHECK_THAT(text, Catch::Contains("1s left"));
}

TEST_CASE("issue 21: a node waiting for node 0's store says so", "[static]") {
  boost::asio::io_context io;
  std::uint16_t closed_port = 0;
  {
    boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::tcp::v4(), 0});
    closed_port = probe.local_endpoint().port();
  }
  auto options = node_options(2, 1, closed_port);
  options.timeout = milliseconds(400);
  options.progress_interval = milliseconds(50);
  StaticRendezvous node1(io, options);
  CapturedWarnings captured;
  run(io, [&]() -> asio::awaitable<void> {
    bool timed_out = false;
    try {
      co_await node1.next_round(1);
    } catch (const TimeoutError&) {
      timed_out = true;
    }
    CHECK(timed_out);
  });
  CHECK_THAT(captured.text.str(),
             Catch::Contains(fmt::format("waiting for node 0 (the store host at 127.0.0.1:{}) to "
                                         "start",
                                         closed_port)));
}

}  // namespace
}  // namespace ddp::rdzv
