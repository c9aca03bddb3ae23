// A connected UDP socket sends nothing, but makes the kernel choose the source address of the
// route to the peer, which local_endpoint() then reports.
#include "runtime/src/local_address.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <fmt/format.h>

#include "ddp/error.hpp"

namespace ddp::runtime {

std::string local_address_toward(const std::string& host, int port) {
  namespace asio = boost::asio;
  asio::io_context io;
  boost::system::error_code ec;
  asio::ip::udp::resolver resolver(io);
  auto endpoints = resolver.resolve(asio::ip::udp::v4(), host, std::to_string(port), ec);
  if (ec || endpoints.empty()) {
    endpoints = resolver.resolve(host, std::to_string(port), ec);
  }
  if (ec || endpoints.empty()) {
    throw IoError(fmt::format("MASTER_ADDR={} does not resolve: {}", host, ec.message()));
  }
  asio::ip::udp::socket socket(io);
  for (const auto& entry : endpoints) {
    socket.close(ec);
    socket.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    socket.connect(entry.endpoint(), ec);
    if (!ec) return socket.local_endpoint().address().to_string();
  }
  throw IoError(fmt::format("no route toward MASTER_ADDR={}: {}", host, ec.message()));
}

}  // namespace ddp::runtime
