// Interface addresses come from getifaddrs(2), so a node in its own network namespace sees only
// its own addresses; the host name is never compared (namespaces share it).

#include "rendezvous/net_address.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <vector>

#include "ddp/error.hpp"

namespace ddp::rdzv {

namespace asio = boost::asio;
using asio::ip::address;

namespace {

std::vector<address> resolve(const std::string& host) {
  boost::system::error_code ec;
  const address literal = asio::ip::make_address(host, ec);
  if (!ec) return {literal};
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, "", ec);
  std::vector<address> out;
  if (ec) return out;
  for (const auto& entry : results) out.push_back(entry.endpoint().address());
  return out;
}

std::vector<address> interface_addresses() {
  std::vector<address> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      asio::ip::address_v4::bytes_type bytes;
      std::copy_n(reinterpret_cast<const unsigned char*>(&in->sin_addr), 4, bytes.begin());
      out.emplace_back(asio::ip::address_v4(bytes));
    } else if (it->ifa_addr->sa_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::copy_n(in6->sin6_addr.s6_addr, 16, bytes.begin());
      out.emplace_back(asio::ip::address_v6(bytes, in6->sin6_scope_id));
    }
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::string route_address(const std::string& host, std::uint16_t port) {
  const std::vector<address> targets = resolve(host);
  if (targets.empty()) throw IoError(fmt::format("cannot resolve rendezvous host '{}'", host));
  std::string last_error;
  for (const address& target : targets) {
    asio::io_context io;
    asio::ip::udp::socket socket(io);
    boost::system::error_code ec;
    socket.open(target.is_v4() ? asio::ip::udp::v4() : asio::ip::udp::v6(), ec);
    if (!ec) socket.connect({target, port == 0 ? std::uint16_t{9} : port}, ec);
    if (!ec) {
      const address local = socket.local_endpoint(ec).address();
      if (!ec) {
        if (local.is_v6()) {
          auto v6 = local.to_v6();
          v6.scope_id(0);
          return v6.to_string();
        }
        return local.to_string();
      }
    }
    last_error = ec.message();
  }
  throw IoError(fmt::format("no route to rendezvous host '{}': {}", host, last_error));
}

bool is_local_host(const std::string& host) {
  if (host == "localhost") return true;
  const std::vector<address> targets = resolve(host);
  if (targets.empty()) return false;
  const std::vector<address> mine = interface_addresses();
  for (const address& target : targets) {
    if (target.is_loopback()) return true;
    for (const address& local : mine) {
      if (local.is_v6() && target.is_v6()) {
        if (local.to_v6().to_bytes() == target.to_v6().to_bytes()) return true;
      } else if (local == target) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace ddp::rdzv
