// Interface addresses come from getifaddrs(2), so a node in its own network namespace sees only
// its own addresses; the host name is never compared (namespaces share it).

#include "rendezvous/net_address.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>

#include <fmt/format.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <variant>
#include <vector>

#include "common/unique_fd.hpp"
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

// The local address of a connected UDP socket to the target, or an error message. A bare socket:
// every agent asks, and an io_context for one connect would cost each an epoll instance, an
// eventfd and a timerfd.
std::variant<address, std::string> local_address_towards(const address& target,
                                                         std::uint16_t port) {
  const asio::ip::udp::endpoint remote(target, port == 0 ? std::uint16_t{9} : port);
  const UniqueFd fd(::socket(remote.protocol().family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::string(std::strerror(errno));
  asio::ip::udp::endpoint local;
  socklen_t length = static_cast<socklen_t>(local.capacity());
  std::variant<address, std::string> out;
  if (::connect(fd.get(), remote.data(), static_cast<socklen_t>(remote.size())) != 0 ||
      ::getsockname(fd.get(), local.data(), &length) != 0) {
    out = std::string(std::strerror(errno));
  } else {
    local.resize(length);
    out = local.address();
  }
  return out;
}

}  // namespace

std::vector<address> local_addresses() {
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

std::string route_address(const std::string& host, std::uint16_t port) {
  const std::vector<address> targets = resolve(host);
  if (targets.empty()) throw IoError(fmt::format("cannot resolve rendezvous host '{}'", host));
  std::string last_error;
  for (const address& target : targets) {
    auto local = local_address_towards(target, port);
    if (auto* error = std::get_if<std::string>(&local)) {
      last_error = *error;
      continue;
    }
    const address& found = std::get<address>(local);
    if (found.is_v6()) {
      auto v6 = found.to_v6();
      v6.scope_id(0);
      return v6.to_string();
    }
    return found.to_string();
  }
  throw IoError(fmt::format("no route to rendezvous host '{}': {}", host, last_error));
}

bool is_local_host(const std::string& host) {
  if (host == "localhost") return true;
  const std::vector<address> mine = local_addresses();
  for (const address& target : resolve(host)) {
    // An IPv6 address is compared without its scope: getifaddrs gives link-local ones theirs.
    const auto is_target = [&target](const address& local) {
      if (!local.is_v6() || !target.is_v6()) return local == target;
      return local.to_v6().to_bytes() == target.to_v6().to_bytes();
    };
    if (target.is_loopback() || std::any_of(mine.begin(), mine.end(), is_target)) return true;
  }
  return false;
}

std::string wildcard_like(const std::string& addr) {
  boost::system::error_code ec;
  const auto parsed = boost::asio::ip::make_address(addr, ec);
  return !ec && parsed.is_v6() ? "::" : "0.0.0.0";
}

}  // namespace ddp::rdzv
