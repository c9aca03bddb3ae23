// LaunchConfig -> the options of the process, stacks and metrics parts.

#include "agent/cli/agent_options.hpp"

namespace ddp::agent {

std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config) {
  if (config.start_method != "forkserver" || config.no_python) return std::nullopt;
  return ForkServerOptions{
      .python = config.python, .preload = config.preload, .fallback = config.preload_fallback};
}

std::pair<std::string, std::uint16_t> stack_store_of(const LaunchConfig& config,
                                                     const rdzv::RendezvousInfo& info) {
  if (config.rdzv_backend == "c10d" && config.rdzv_endpoint.port.value_or(29400) != 0) {
    return {config.rdzv_endpoint.host,
            static_cast<std::uint16_t>(config.rdzv_endpoint.port.value_or(29400))};
  }
  return {info.master_addr, info.master_port};
}

MetricsSpec metrics_spec(const LaunchConfig& config) {
  return MetricsSpec{.run_id = config.rdzv_id,
                     .rdzv_backend = config.rdzv_backend,
                     .role = config.role,
                     .max_restarts = config.max_restarts,
                     .nproc_per_node = config.nproc_per_node,
                     .addr = config.metrics_addr,
                     .port = config.metrics_port};
}

}  // namespace ddp::agent
