#pragma once
// The narrow options the parts below the command line take, read off the LaunchConfig: the
// forkserver's (process), the stack store's (stacks) and the metrics' (core). Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "agent/cli/launch_config.hpp"
#include "agent/core/agent_metrics.hpp"
#include "agent/process/forkserver.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// The forkserver's options, nullopt when workers are exec'd (spawn, fork, --no_python).
std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config);

// The store stack requests go through, the one ddprun-stacks is pointed at: static, the job's
// store (master_addr:master_port, as workers see it); c10d, the rendezvous store at
// --rdzv_endpoint (each round's workers get a store of their own), else the workers' store when
// the endpoint's port was left to the system (--standalone).
std::pair<std::string, std::uint16_t> stack_store_of(const LaunchConfig& config,
                                                     const rdzv::RendezvousInfo& info);

// --metrics_port and --metrics_addr with the job's identity for ddprun_info.
MetricsSpec metrics_spec(const LaunchConfig& config);

}  // namespace ddp::agent
