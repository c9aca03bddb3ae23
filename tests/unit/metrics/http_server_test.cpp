// MetricsServer over real sockets on port 0: scrapes, keep-alive, bad requests closing only
// their own connection, a half-sent request not holding up others, idle connections timing out.

#include "common/metrics/http_server.hpp"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <thread>

#include "ddp/error.hpp"

using namespace ddp::metrics;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;

namespace {

// The server on its own io_context thread; the test's clients block on the main thread.
class HttpServerThread {
 public:
  explicit HttpServerThread(Registry& registry,
                        std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.timeout = timeout;
    server_ = std::make_unique<MetricsServer>(io_, registry, options);
    server_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~HttpServerThread() {
    asio::post(io_, [this] {
      server_->stop();
      work_.reset();
    });
    thread_.join();
  }
  std::uint16_t port() const { return server_->port(); }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  std::unique_ptr<MetricsServer> server_;
  std::thread thread_;
};

class Client {
 public:
  explicit Client(std::uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    timeval tv{5, 0};  // a broken server fails the test instead of hanging it
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(const std::string& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  http::response<http::string_body> response() {
    http::response<http::string_body> out;
    boost::system::error_code ec;
    http::read(socket_, buffer_, out, ec);
    INFO(ec.message());
    REQUIRE_FALSE(ec);
    return out;
  }
  bool is_closed_by_server() {
    char byte;
    boost::system::error_code ec;
    socket_.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

constexpr const char* kGet = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";

}  // namespace

TEST_CASE("a scrape over TCP returns the registry, twice on one keep-alive connection", "[http]") {
  Registry registry;
  registry.gauge("ddprun_up", "Up.").set(1);
  HttpServerThread server(registry);
  REQUIRE(server.port() != 0);
  Client client(server.port());
  client.send(kGet);
  auto first = client.response();
  CHECK(first.result() == http::status::ok);
  CHECK(first.body() == "# HELP ddprun_up Up.\n# TYPE ddprun_up gauge\nddprun_up 1\n");
  client.send(kGet);
  CHECK(client.response().result() == http::status::ok);
}

TEST_CASE("a bad request gets 400 and a close, and the server goes on serving", "[http]") {
  Registry registry;
  HttpServerThread server(registry);
  for (const std::string& bad_input :
       {std::string("NOT HTTP AT ALL\r\n\r\n"),
        "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'x') + "\r\n\r\n"}) {
    Client bad(server.port());
    bad.send(bad_input);
    CHECK(bad.response().result() == http::status::bad_request);
    CHECK(bad.is_closed_by_server());
  }
  Client good(server.port());
  good.send(kGet);
  CHECK(good.response().result() == http::status::ok);
}

TEST_CASE("a half-sent request does not hold up other clients", "[http]") {
  Registry registry;
  HttpServerThread server(registry);
  Client slow(server.port());
  slow.send("GET /metr");
  Client fast(server.port());
  fast.send(kGet);
  CHECK(fast.response().result() == http::status::ok);
  slow.send("ics HTTP/1.1\r\n\r\n");
  CHECK(slow.response().result() == http::status::ok);
}

TEST_CASE("a connection silent past the deadline is closed", "[http]") {
  Registry registry;
  HttpServerThread server(registry, std::chrono::milliseconds(100));
  Client idle(server.port());
  CHECK(idle.is_closed_by_server());
}

TEST_CASE("a taken port is an IoError naming the flag", "[http]") {
  Registry registry;
  HttpServerThread first(registry);
  asio::io_context io;
  HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = first.port();
  CHECK_THROWS_WITH(MetricsServer(io, registry, options),
                    Catch::Contains("--metrics_port") && Catch::Contains("in use"));
}
