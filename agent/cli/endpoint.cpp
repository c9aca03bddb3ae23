// --rdzv_endpoint parsing with torchrun's rules: empty means localhost, "[v6]" brackets are
// removed, otherwise the port is after the LAST ':' (so a bare IPv6 address without brackets and
// without a port is read as host:port, as torchrun does), host characters limited to [\w.:-].

#include "agent/cli/endpoint.hpp"

#include <fmt/format.h>

#include <cctype>

#include "agent/core/text.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

using detail::strip;

bool is_valid_host(std::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

int parse_port(std::string_view text, std::string_view whole, std::string_view flag) {
  // torchrun: ^[0-9]{1,5}$ and < 65536.
  bool ok = !text.empty() && text.size() <= 5;
  int port = 0;
  for (char c : text) {
    if (c < '0' || c > '9') ok = false;
    port = port * 10 + (c - '0');
  }
  if (!ok || port > kMaxPort) {
    throw ConfigError(fmt::format("{}: invalid port '{}' in endpoint '{}' (expected 0-{})", flag,
                                  text, whole, kMaxPort));
  }
  return port;
}

}  // namespace

Endpoint parse_endpoint(std::string_view text, std::optional<int> default_port,
                        std::string_view flag) {
  const std::string_view whole = strip(text);
  Endpoint endpoint;
  endpoint.port = default_port;
  if (whole.empty()) {
    endpoint.host = "localhost";
    return endpoint;
  }
  std::string_view host = whole;
  std::string_view port;
  bool has_port = false;
  if (whole.front() == '[') {
    const std::size_t close = whole.find(']');
    if (close == std::string_view::npos) {
      throw ConfigError(fmt::format("{}: missing ']' in endpoint '{}'", flag, whole));
    }
    host = whole.substr(1, close - 1);
    const std::string_view rest = whole.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        throw ConfigError(
            fmt::format("{}: expected ':<port>' after ']' in endpoint '{}'", flag, whole));
      }
      port = rest.substr(1);
      has_port = true;
    }
  } else if (const std::size_t colon = whole.rfind(':'); colon != std::string_view::npos) {
    host = whole.substr(0, colon);
    port = whole.substr(colon + 1);
    has_port = true;
  }
  if (!is_valid_host(host)) {
    throw ConfigError(fmt::format("{}: invalid host '{}' in endpoint '{}'", flag, host, whole));
  }
  endpoint.host = std::string(host);
  if (has_port) endpoint.port = parse_port(port, whole, flag);
  return endpoint;
}

std::string to_string(const Endpoint& endpoint) {
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  const std::string host = v6 ? "[" + endpoint.host + "]" : endpoint.host;
  return endpoint.port ? fmt::format("{}:{}", host, *endpoint.port) : host;
}

}  // namespace ddp::agent
