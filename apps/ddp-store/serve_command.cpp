// ddp-store serve: parse --host/--port, bind (port 0 picks one), print "listening on H:P" once the
// server accepts, and run the io_context until SIGINT or SIGTERM stops it. --metrics_port serves
// the store's counters to Prometheus from the same io_context.

#include "apps/ddp-store/serve_command.hpp"

#include "common/log.hpp"
#include "common/metrics/http_server.hpp"
#include "common/metrics/process_metrics.hpp"
#include "ddp/error.hpp"
#include "rendezvous/auth/token_file.hpp"
#include "rendezvous/metrics/store_metrics.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>

namespace ddp::store_cli {

int run_serve(const std::vector<std::string>& args) {
  CLI::App app{"Run a TCPStore-compatible key-value store (PyTorch 1.13 and 2.x clients).",
               "ddp-store serve"};
  std::string host = "0.0.0.0";
  std::uint16_t port = 29500;
  std::string log_level;
  int keepalive_s = 60;
  app.add_option("--host", host, "address to listen on (0.0.0.0 any IPv4, :: any IPv6 and IPv4)")
      ->capture_default_str();
  app.add_option("--port", port, "port to listen on; 0 picks a free one")->capture_default_str();
  app.add_option("--log_level,--log-level", log_level, "trace, debug, info, warn, error or off");
  app.add_option("--keepalive_s,--keepalive-s", keepalive_s,
                 "drop a peer gone without a FIN within this many seconds (TCP keepalive), and a "
                 "connection that sends part of a request and then nothing for as long; 0: never")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  std::string token_file;
  std::string run_id = "none";
  app.add_option("--token_file,--token-file", token_file,
                 "serve only clients that prove they hold the secret in this file (ddprun's "
                 "handshake, docs/security.md); PyTorch's clients cannot");
  app.add_option("--run_id,--run-id", run_id, "the run id the secret is bound to")
      ->capture_default_str();
  metrics::HttpServerOptions metrics_options;
  metrics_options.host = "127.0.0.1";  // loopback unless --metrics_addr (docs/security.md)
  app.add_option("--metrics_port,--metrics-port", metrics_options.port,
                 "serve Prometheus metrics at http://ADDR:PORT/metrics; 0 (default) = off");
  app.add_option("--metrics_addr,--metrics-addr", metrics_options.host,
                 "address of the metrics endpoint (default: 127.0.0.1; \"\" = every interface)");
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ddp-store serve: %s\n", e.what());
    return 2;
  }

  try {
    if (!log_level.empty()) log::set_level(log_level);
    boost::asio::io_context io;
    rdzv::StoreLimits limits;
    limits.keepalive = std::chrono::seconds(keepalive_s);
    limits.partial_request_timeout = std::chrono::seconds(keepalive_s);
    rdzv::StoreGuard guard;
    if (!token_file.empty()) {
      guard.credentials = std::make_shared<const rdzv::auth::Credentials>(
          rdzv::auth::Credentials{rdzv::auth::read_token_file(token_file, "--token_file"),
                                  run_id});
    }
    rdzv::TcpStoreServer server(io, host, port, limits, std::move(guard));
    server.start();
    metrics::Registry registry;
    std::unique_ptr<metrics::MetricsServer> metrics_server;
    if (metrics_options.port != 0) {
      registry.gauge("ddp_store_up", "1 while this ddp-store serves.").set(1);
      rdzv::export_store_metrics(registry);
      metrics::export_process_metrics(registry);
      metrics_server = std::make_unique<metrics::MetricsServer>(io, registry, metrics_options);
      metrics_server->start();
      log::get("store")->info("metrics at http://{}/metrics", metrics_server->address());
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      log::get("store")->info("stopping on signal {}", signal);
      server.stop();
      if (metrics_server) metrics_server->stop();
      io.stop();
    });
    // The acceptor listens already; connections made from now on are served once io runs.
    std::printf("listening on %s:%u\n", host.c_str(), static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    io.run();
    return 0;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "ddp-store serve: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp-store serve: %s\n", e.what());
    return 1;
  }
}

}  // namespace ddp::store_cli
