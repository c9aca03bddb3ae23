// Connection set-up for the etcd client. Names resolve on every connect (members are few and
// connections long-lived), so a member that moved to another address is found again. With TLS
// the member's certificate must chain to cacert and name the member as --rdzv_endpoint gives it
// (DNS name or IP), as curl and etcdctl check it.

#include "rendezvous/etcd/etcd_connect.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <tuple>

#include "ddp/error.hpp"
#include "rendezvous/etcd/etcd_tls.hpp"

namespace ddp::rdzv::etcd::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;

struct Connection::Tls {
  std::shared_ptr<TlsContext> context;  // outlives the stream
  beast::ssl_stream<beast::tcp_stream> stream;
  Tls(beast::tcp_stream tcp, std::shared_ptr<TlsContext> c)
      : context(std::move(c)), stream(std::move(tcp), context->context) {}
};

Connection::Connection(beast::tcp_stream tcp, std::shared_ptr<TlsContext> tls) {
  if (tls) {
    tls_ = std::make_unique<Tls>(std::move(tcp), std::move(tls));
  } else {
    plain_ = std::make_unique<beast::tcp_stream>(std::move(tcp));
  }
}

Connection::~Connection() = default;

beast::tcp_stream& Connection::tcp() { return tls_ ? tls_->stream.next_layer() : *plain_; }

void Connection::close() {
  beast::error_code ignored;
  tcp().socket().close(ignored);
}

asio::awaitable<void> Connection::handshake(const Member& member) {
  SSL* ssl = tls_->stream.native_handle();
  boost::system::error_code parse_error;
  asio::ip::make_address(member.host, parse_error);
  if (parse_error) {
    // A name: send it as SNI and require it in the certificate's names.
    ::SSL_set_tlsext_host_name(ssl, member.host.c_str());
    ::SSL_set1_host(ssl, member.host.c_str());
  } else {
    // An address: require it among the certificate's IP SANs.
    ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(ssl), member.host.c_str());
  }
  auto [error] = co_await tls_->stream.async_handshake(asio::ssl::stream_base::client,
                                                       asio::as_tuple(asio::use_awaitable));
  if (!error) co_return;
  const std::string text =
      "TLS handshake: " + (error == beast::error::timeout
                               ? std::string("no answer")
                               : tls_error_text(error, ssl, member.host, *tls_->context));
  if (is_tls_error(error)) throw TlsError(text);
  throw IoError(text);
}

asio::awaitable<void> Connection::send_all(const std::string& bytes) {
  const auto write = [&bytes](auto& stream) {
    return asio::async_write(stream, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
  };
  auto sending = tls_ ? write(tls_->stream) : write(*plain_);  // (not under co_await: GCC 12)
  auto [err, n] = co_await std::move(sending);
  if (err) throw IoError(fmt::format("send: {}", err.message()));
}

asio::awaitable<std::tuple<boost::system::error_code, std::size_t>> Connection::read_some(
    asio::mutable_buffer buffer) {
  return tls_ ? tls_->stream.async_read_some(buffer, asio::as_tuple(asio::use_awaitable))
              : plain_->async_read_some(buffer, asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<std::unique_ptr<Connection>> connect_member(
    asio::any_io_executor executor, const Member& member, std::chrono::milliseconds timeout,
    const std::shared_ptr<TlsContext>& tls) {
  tcp::resolver resolver(executor);
  auto [rerr, endpoints] = co_await resolver.async_resolve(member.host, std::to_string(member.port),
                                                           asio::as_tuple(asio::use_awaitable));
  if (rerr) throw IoError(fmt::format("resolve: {}", rerr.message()));
  beast::tcp_stream stream(executor);
  stream.expires_after(timeout);
  auto [cerr, endpoint] =
      co_await stream.async_connect(endpoints, asio::as_tuple(asio::use_awaitable));
  if (cerr) throw IoError(fmt::format("connect: {}", cerr.message()));
  stream.socket().set_option(tcp::no_delay(true));
  auto connection = std::make_unique<Connection>(std::move(stream), tls);
  if (tls) co_await connection->handshake(member);  // under the connect's deadline
  co_return connection;
}

}  // namespace ddp::rdzv::etcd::detail
