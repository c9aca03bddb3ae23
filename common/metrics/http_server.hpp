#pragma once
// MetricsServer: the HTTP endpoint (Boost.Beast) that serves a Registry at /metrics, on the
// io_context it is given (the agent's or the store's single thread). Every read and write is
// asynchronous with a deadline, so a slow or silent client never holds up the loop; bad input
// closes only that connection, with one log line naming the peer.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/metrics/registry.hpp"

namespace ddp::metrics {

namespace detail {
struct MetricsServerState;
}

struct HttpServerOptions {
  std::string host;        // "" = every interface (IPv6 and IPv4; IPv4 only without IPv6)
  std::uint16_t port = 0;  // 0 = a free port (tests read it back with port())
  std::string flag = "--metrics_port";  // names the option in bind errors
  std::size_t max_connections = 32;     // more are accepted and closed at once
  // Deadline of each request read (a keep-alive connection idle this long is closed quietly)
  // and of each response write.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// What a server that serves no registry answers (the health check): a status and a text body.
struct PlainReply {
  unsigned status = 200;
  std::string body;  // sent as text/plain
};
using PlainHandler = std::function<PlainReply(std::string_view path)>;

class MetricsServer {
 public:
  // Binds and listens. Throws IoError naming options.flag and the address when that fails.
  // `registry` must outlive the server.
  MetricsServer(boost::asio::io_context& io, Registry& registry, HttpServerOptions options);
  // The same, answering every GET and HEAD with `handler`'s reply (called on the loop, with the
  // request's path without its query) instead of serving a registry.
  MetricsServer(boost::asio::io_context& io, PlainHandler handler, HttpServerOptions options);
  ~MetricsServer();  // stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Starts accepting on the io_context. Returns at once.
  void start();
  // Stops accepting and closes every connection; the registry is not read again. Idempotent.
  void stop();

  std::uint16_t port() const;
  // "host:port" as bound, for the startup log line.
  std::string address() const;
  std::size_t connection_count() const;

 private:
  std::shared_ptr<detail::MetricsServerState> shared_;
  std::uint16_t port_ = 0;
};

}  // namespace ddp::metrics
