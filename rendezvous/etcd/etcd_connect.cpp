// Connection set-up for the etcd client. Names resolve on every connect (members are few and
// connections long-lived), so a member that moved to another address is found again.

#include "rendezvous/etcd/etcd_connect.hpp"

#include <fmt/format.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "ddp/error.hpp"

namespace ddp::rdzv::etcd::detail {

namespace asio = boost::asio;
using asio::ip::tcp;

asio::awaitable<std::unique_ptr<boost::beast::tcp_stream>> connect_member(
    asio::any_io_executor executor, const Member& member, std::chrono::milliseconds timeout) {
  tcp::resolver resolver(executor);
  auto [rerr, endpoints] = co_await resolver.async_resolve(member.host, std::to_string(member.port),
                                                           asio::as_tuple(asio::use_awaitable));
  if (rerr) throw IoError(fmt::format("resolve: {}", rerr.message()));
  auto stream = std::make_unique<boost::beast::tcp_stream>(executor);
  stream->expires_after(timeout);
  auto [cerr, endpoint] =
      co_await stream->async_connect(endpoints, asio::as_tuple(asio::use_awaitable));
  if (cerr) throw IoError(fmt::format("connect: {}", cerr.message()));
  stream->socket().set_option(tcp::no_delay(true));
  co_return stream;
}

asio::awaitable<void> send_all(boost::beast::tcp_stream& stream, const std::string& bytes) {
  auto [err, n] =
      co_await asio::async_write(stream, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
  if (err) throw IoError(fmt::format("send: {}", err.message()));
}

}  // namespace ddp::rdzv::etcd::detail
