#pragma once
// This node's address as other nodes should use it, found without reverse DNS: the local
// address of the interface that routes to a given peer (a connected UDP socket sends nothing),
// and whether a host name or literal names this machine (its interfaces' addresses).

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::rdzv {

// The local address (IPv4 or IPv6 text, no brackets) this machine uses to reach host:port. The
// host is an IP literal or a name resolved forward. Throws IoError naming the host.
std::string route_address(const std::string& host, std::uint16_t port);

// True when `host` is "localhost", a loopback literal, or resolves to an address held by one of
// this machine's (this network namespace's) interfaces. Unresolvable names are not local.
bool is_local_host(const std::string& host);

// The wildcard address a server binds to be reached the way `addr` is: "::" for an IPv6
// literal, "0.0.0.0" for anything else.
std::string wildcard_like(const std::string& addr);

// Every address this machine's (this network namespace's) interfaces hold, loopback included.
std::vector<boost::asio::ip::address> local_addresses();

}  // namespace ddp::rdzv
