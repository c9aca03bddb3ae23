// MetricsServer: one accept coroutine, one coroutine per connection (read a request, write its
// response, repeat while keep-alive). Beast's tcp_stream gives each operation a deadline. The
// acceptor, the registry pointer and the open sockets live in a block the coroutines share, so
// stopping or destroying the server while their frames are still queued on the loop is safe.

#include "common/metrics/http_server.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <unordered_set>
#include <vector>

#include "common/detached_error.hpp"
#include "common/log.hpp"
#include "common/metrics/http_exchange.hpp"
#include "ddp/error.hpp"

namespace ddp::metrics {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace detail {

struct MetricsServerState {
  MetricsServerState(asio::io_context& io, Registry* r, PlainHandler h, HttpServerOptions o)
      : acceptor(io), registry(r), handler(std::move(h)), options(std::move(o)) {}
  tcp::acceptor acceptor;
  Registry* registry;    // null with a handler, and once stopped
  PlainHandler handler;  // set instead of a registry
  HttpServerOptions options;
  std::unordered_set<tcp::socket*> live;  // the open connections' sockets (in coroutine frames)
  bool started = false;
  bool stopped = false;
};

}  // namespace detail

namespace {

using Shared = detail::MetricsServerState;

std::string format_endpoint(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  if (address.is_v6() && !address.to_v6().is_v4_mapped()) {
    return fmt::format("[{}]:{}", address.to_string(), endpoint.port());
  }
  const auto v4 = address.is_v6() ? asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6())
                                  : address.to_v4();
  return fmt::format("{}:{}", v4.to_string(), endpoint.port());
}

// "" = every interface: IPv6 dual-stack first, IPv4 alone where the kernel has no IPv6.
std::vector<tcp::endpoint> candidates(asio::io_context& io, const HttpServerOptions& options) {
  if (options.host.empty()) return {{tcp::v6(), options.port}, {tcp::v4(), options.port}};
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (!ec) return {{address, options.port}};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
  if (ec) {
    throw IoError(fmt::format("{} {}: cannot resolve the metrics address '{}': {}", options.flag,
                              options.port, options.host, ec.message()));
  }
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

void listen(asio::io_context& io, tcp::acceptor& acceptor, const HttpServerOptions& options) {
  boost::system::error_code ec;
  for (const auto& endpoint : candidates(io, options)) {
    acceptor.close(ec);
    acceptor.open(endpoint.protocol(), ec);
    if (ec) continue;
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (endpoint.protocol() == tcp::v6() && options.host.empty()) {
      acceptor.set_option(asio::ip::v6_only(false), ec);
    }
    acceptor.bind(endpoint, ec);
    if (ec) continue;
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return;
  }
  throw IoError(fmt::format("{} {}: cannot listen on {}:{}: {}", options.flag, options.port,
                            options.host.empty() ? "*" : options.host, options.port, ec.message()));
}

// Ends of a connection that are no one's fault: the client closed (between requests, or in the
// middle of one: it gave up), the server stopped, or a keep-alive connection sat idle past the
// deadline.
bool is_quiet_end(const boost::system::error_code& ec, bool got_some) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
         (ec == beast::error::timeout && !got_some);
}

void close_socket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

asio::awaitable<void> serve_connection(std::shared_ptr<Shared> shared, tcp::socket socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? "unknown peer" : format_endpoint(remote);
  beast::tcp_stream stream(std::move(socket));
  shared->live.insert(&stream.socket());
  struct Forget {
    Shared& shared;
    tcp::socket* socket;
    ~Forget() { shared.live.erase(socket); }
  } forget{*shared, &stream.socket()};

  const auto timeout = shared->options.timeout;
  beast::flat_buffer buffer(kMaxRequestHeaderBytes);
  for (;;) {
    HttpRequestParser parser;
    apply_request_limits(parser);
    stream.expires_after(timeout);
    auto [read_error, read_bytes] =
        co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (shared->stopped) co_return;
    if (read_error) {
      if (is_quiet_end(read_error, parser.got_some())) break;
      log::get("metrics")->warn("metrics endpoint: bad request from {}: {}; closing the connection",
                                peer, read_error.message());
      auto response = bad_request_response(read_error.message());
      stream.expires_after(timeout);
      co_await http::async_write(stream, response, asio::as_tuple(asio::use_awaitable));
      break;
    }
    Registry* registry = shared->registry;
    const PlainHandler& handler = shared->handler;
    auto response =
        handler ? make_plain_response(parser.get(),
                                      [&handler](std::string_view path) {
                                        PlainReply reply = handler(path);
                                        return std::pair(reply.status, std::move(reply.body));
                                      })
                : make_response(parser.get(), [registry] { return registry->expose(); });
    stream.expires_after(timeout);
    auto [write_error, written] =
        co_await http::async_write(stream, response, asio::as_tuple(asio::use_awaitable));
    if (write_error || !response.keep_alive() || shared->stopped) break;
  }
  if (!shared->stopped) close_socket(stream.socket());
}

asio::awaitable<void> accept_loop(std::shared_ptr<Shared> shared) {
  auto executor = co_await asio::this_coro::executor;
  for (;;) {
    auto [ec, socket] = co_await shared->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (shared->stopped || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      log::get("metrics")->warn("metrics endpoint: accept failed: {}", ec.message());
      continue;
    }
    if (shared->live.size() >= shared->options.max_connections) {
      log::get("metrics")->warn("metrics endpoint: {} connections open; closing a new one",
                                shared->live.size());
      continue;  // `socket` closes here
    }
    asio::co_spawn(
        executor, serve_connection(shared, std::move(socket)),
        log_if_thrown("metrics", spdlog::level::warn, "metrics endpoint: connection failed"));
  }
}

}  // namespace

MetricsServer::MetricsServer(asio::io_context& io, Registry& registry, HttpServerOptions options)
    : shared_(std::make_shared<Shared>(io, &registry, PlainHandler(), std::move(options))) {
  listen(io, shared_->acceptor, shared_->options);
  port_ = shared_->acceptor.local_endpoint().port();
}

MetricsServer::MetricsServer(asio::io_context& io, PlainHandler handler, HttpServerOptions options)
    : shared_(std::make_shared<Shared>(io, nullptr, std::move(handler), std::move(options))) {
  listen(io, shared_->acceptor, shared_->options);
  port_ = shared_->acceptor.local_endpoint().port();
}

MetricsServer::~MetricsServer() { stop(); }

void MetricsServer::start() {
  if (shared_->started || shared_->stopped) return;
  shared_->started = true;
  asio::co_spawn(shared_->acceptor.get_executor(), accept_loop(shared_),
                 log_if_thrown("metrics", spdlog::level::err, "metrics endpoint stopped"));
}

void MetricsServer::stop() {
  if (shared_->stopped) return;
  shared_->stopped = true;
  shared_->registry = nullptr;
  boost::system::error_code ignored;
  shared_->acceptor.close(ignored);
  for (tcp::socket* socket : shared_->live) close_socket(*socket);
}

std::uint16_t MetricsServer::port() const { return port_; }

std::string MetricsServer::address() const {
  boost::system::error_code ec;
  const auto endpoint = shared_->acceptor.local_endpoint(ec);
  return ec ? "closed" : format_endpoint(endpoint);
}

std::size_t MetricsServer::connection_count() const { return shared_->live.size(); }

}  // namespace ddp::metrics
