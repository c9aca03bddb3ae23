// make_rendezvous: maps the LaunchConfig's rendezvous options onto a backend.

#include "agent/rendezvous_factory.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "ddp/error.hpp"
#include "rendezvous/static_rendezvous.hpp"

namespace ddp::agent {
namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::unique_ptr<rdzv::Rendezvous> make_static(const LaunchConfig& config,
                                              boost::asio::io_context& io) {
  rdzv::StaticRendezvousOptions options;
  options.run_id = config.rdzv_id;
  options.nnodes = config.nnodes_max;
  options.node_rank = config.node_rank;
  // As torchrun: --rdzv_endpoint if given, else master_addr:master_port (parse_launch_config
  // folds both into rdzv_endpoint). No port on one node: node 0 binds a free one.
  options.master_addr = config.rdzv_endpoint.host;
  // (Multi-node always has a port: parse_launch_config defaults it to 29500.)
  options.master_port = static_cast<std::uint16_t>(config.rdzv_endpoint.port.value_or(0));
  options.timeout = config.rdzv_conf.timeout();
  options.max_restarts = config.max_restarts;
  options.node_name = host_name();
  return std::make_unique<rdzv::StaticRendezvous>(io, std::move(options));
}

}  // namespace

std::unique_ptr<rdzv::Rendezvous> make_rendezvous(const LaunchConfig& config,
                                                  boost::asio::io_context& io) {
  if (config.rdzv_backend == "static") return make_static(config, io);
  if (config.rdzv_backend == "c10d") {
    throw ConfigError("--rdzv_backend=c10d: not supported yet");
  }
  throw ConfigError(fmt::format("--rdzv_backend={}: not supported yet", config.rdzv_backend));
}

}  // namespace ddp::agent
