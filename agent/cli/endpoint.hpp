#pragma once
// Rendezvous endpoints "host[:port]" and "[v6addr][:port]", parsed as torchrun parses
// --rdzv_endpoint (strip, brackets removed, split at the last ':', port 0..65535).

#include <optional>
#include <string>
#include <string_view>

namespace ddp::agent {

inline constexpr int kMaxPort = 65535;  // the largest TCP port

struct Endpoint {
  std::string host;         // without brackets; "localhost" when the input was empty
  std::optional<int> port;  // nullopt when neither given nor defaulted

  bool operator==(const Endpoint&) const = default;
};

// Parses `text`. An empty text means "localhost". A missing port becomes `default_port`.
// Throws ConfigError naming `flag` on a bad host or port.
Endpoint parse_endpoint(std::string_view text, std::optional<int> default_port,
                        std::string_view flag);

// "host:port", "[v6]:port" or "host" when the port is unset.
std::string to_string(const Endpoint& endpoint);

}  // namespace ddp::agent
