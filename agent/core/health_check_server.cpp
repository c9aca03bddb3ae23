// HealthCheckServer: the metrics endpoint's HTTP server with a plain handler. The reply is built
// on the loop that runs the agent, so an answer at all also says that the loop is alive; the
// progress time says whether the file-timer watchdog (when on) still makes its passes.

#include "agent/core/health_check_server.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {

metrics::PlainReply health_reply(std::int64_t last, std::int64_t now,
                                 std::chrono::seconds timeout) {
  const bool alive = now - last <= timeout.count();
  return metrics::PlainReply{
      .status = alive ? 200u : 503u,
      .body =
          fmt::format("{{\"version\": 1, \"alive\": {}, \"last_progress_time\": {}, \"now\": {}, "
                      "\"timeout\": {}}}\n",
                      alive, last, now, timeout.count())};
}

namespace {

metrics::HttpServerOptions options_for(std::uint16_t port) {
  metrics::HttpServerOptions options;
  options.port = port;  // every interface: probes come from outside the node
  options.flag = kHealthCheckPortEnv;
  return options;
}

}  // namespace

HealthCheckServer::HealthCheckServer(boost::asio::io_context& io, std::uint16_t port,
                                     ProgressTime progress, std::chrono::seconds timeout)
    : server_(
          io,
          [progress = std::move(progress), timeout](std::string_view) {
            const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
            return health_reply(progress(), now, timeout);
          },
          options_for(port)) {
  server_.start();
}

std::unique_ptr<HealthCheckServer> make_health_check_server(
    boost::asio::io_context& io, const std::map<std::string, std::string>& env,
    ProgressTime progress) {
  const auto it = env.find(kHealthCheckPortEnv);
  if (it == env.end()) return nullptr;
  const auto port = parse_number<int>(it->second);
  if (!port || *port < 0 || *port > 65535) {
    throw ConfigError(fmt::format("{}: expected a port number (0 to 65535), got '{}'",
                                  kHealthCheckPortEnv, it->second));
  }
  auto server = std::make_unique<HealthCheckServer>(io, static_cast<std::uint16_t>(*port),
                                                    std::move(progress));
  log::get("agent")->info("health check server on port {}", server->port());
  return server;
}

}  // namespace ddp::agent
