#pragma once
// HealthCheckServer: TORCHELASTIC_HEALTH_CHECK_PORT. torchrun starts a health-check server on that
// port before the rendezvous and keeps it through the exit barrier, fed with the agent's last
// progress time; PyTorch's own server is a stub meant to be replaced. ddprun's answers HTTP
// GET/HEAD on any path from the agent's loop: 200 while the last progress is at most `timeout`
// old, else 503, with the times as a small JSON body. Agent thread only.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/metrics/http_server.hpp"

namespace ddp::agent {

inline constexpr const char* kHealthCheckPortEnv = "TORCHELASTIC_HEALTH_CHECK_PORT";

// Seconds since the epoch of the agent's last progress.
using ProgressTime = std::function<std::int64_t()>;

// The reply for a progress time `last` seen at `now` (both epoch seconds).
metrics::PlainReply health_reply(std::int64_t last, std::int64_t now, std::chrono::seconds timeout);

class HealthCheckServer {
 public:
  // Binds every interface on `port` (0: a free one) and serves once the loop runs. Throws IoError
  // naming TORCHELASTIC_HEALTH_CHECK_PORT when the port cannot be bound.
  HealthCheckServer(boost::asio::io_context& io, std::uint16_t port, ProgressTime progress,
                    std::chrono::seconds timeout = std::chrono::seconds(60));
  std::uint16_t port() const { return server_.port(); }

 private:
  metrics::MetricsServer server_;
};

// TORCHELASTIC_HEALTH_CHECK_PORT in `env`: the server on that port, fed by `progress`; nullptr
// when the variable is unset. Throws ConfigError naming the variable for a value that is not a
// port number (torchrun logs it and starts no server).
std::unique_ptr<HealthCheckServer> make_health_check_server(
    boost::asio::io_context& io, const std::map<std::string, std::string>& env,
    ProgressTime progress);

}  // namespace ddp::agent
