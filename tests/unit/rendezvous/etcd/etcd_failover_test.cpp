// The etcd client's failover past a silent member (its node cut off: the connection opens, no
// answer ever comes): a keep-alive gives that member at most its per-member share and reaches the
// next member well before the attempt timeout, so a short lease outlives one silent member.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/etcd/etcd_client.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using ddp::rdzv::etcd::ClientOptions;
using ddp::rdzv::etcd::EtcdClient;
using ddp::rdzv::etcd::Member;
using namespace std::chrono_literals;

// Accepts on 127.0.0.1:0; when `answer` is set, answers each POST with it, else reads and never
// answers (the connections stay open until the test ends).
class Member127 {
 public:
  Member127(asio::io_context& io, std::optional<std::string> answer)
      : answer_(std::move(answer)), acceptor_(io, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(io, accept_loop(), asio::detached);
  }
  Member member() const { return Member{"127.0.0.1", acceptor_.local_endpoint().port()}; }
  int requests = 0;

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [error, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (error) co_return;
      auto kept = std::make_shared<tcp::socket>(std::move(socket));
      held_.push_back(kept);
      asio::co_spawn(acceptor_.get_executor(), serve(kept), asio::detached);
    }
  }
  asio::awaitable<void> serve(std::shared_ptr<tcp::socket> socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      auto [read, n] =
          co_await http::async_read(*socket, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (read) co_return;
      ++requests;
      if (!answer_) continue;  // silent: the request is read, no answer is ever written
      http::response<http::string_body> response{http::status::ok, 11};
      response.set(http::field::content_type, "application/json");
      response.body() = *answer_;
      response.prepare_payload();
      auto [write, m] =
          co_await http::async_write(*socket, response, asio::as_tuple(asio::use_awaitable));
      if (write) co_return;
    }
  }

  std::optional<std::string> answer_;
  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<tcp::socket>> held_;
};

TEST_CASE("a keep-alive moves past a silent member within its per-member share", "[etcd]") {
  asio::io_context io;
  Member127 silent(io, std::nullopt);
  Member127 live(io, R"({"result":{"header":{},"ID":"5","TTL":"5"}})");
  ClientOptions options;
  options.members = {silent.member(), live.member()};
  options.attempt_timeout = 5s;   // an ordinary call's share of one member
  options.failover_window = 60s;  // the agent's window: a keep-alive retries this long
  auto client = std::make_shared<EtcdClient>(io.get_executor(), options);

  std::optional<std::int64_t> ttl;
  bool late = false;
  asio::steady_timer give_up(io, 4s);  // under the attempt timeout: only the share can pass
  give_up.async_wait([&](boost::system::error_code ec) {
    if (!ec) late = true;
    io.stop();
  });
  asio::co_spawn(io, client->lease_keepalive(5, options.failover_window, 200ms),
                 [&](std::exception_ptr error, std::int64_t left) {
                   if (!error) ttl = left;
                   io.stop();
                 });
  io.run();

  CHECK_FALSE(late);
  CHECK(ttl == 5);
  CHECK(silent.requests == 1);
  CHECK(live.requests == 1);
}

}  // namespace
