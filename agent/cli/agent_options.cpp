// LaunchConfig -> the options of the process, stacks and metrics parts.

#include "agent/cli/agent_options.hpp"

namespace ddp::agent {

bool forks_by_default(const LaunchConfig& config) {
  return config.recovery == "inprocess" &&
         config.source_of("start_method") == ValueSource::kDefault;
}

std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config) {
  const bool implied = forks_by_default(config);
  if ((config.start_method != "forkserver" && !implied) || config.no_python) return std::nullopt;
  // A template the user did not ask for must not fail a launch that exec would run (a Python
  // without torch, an import that initialises CUDA): it falls back to exec with a warning.
  return ForkServerOptions{.python = config.python,
                           .preload = config.preload,
                           .fallback = config.preload_fallback || implied,
                           .by_default = implied};
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
