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

// True when --recovery=inprocess forks Python workers from the forkserver because no
// --start_method (nor PET_START_METHOD) was given: a joining node's worker then starts with
// torch already imported (docs/elastic.md says why). An explicit --start_method wins.
bool forks_by_default(const LaunchConfig& config);

// The forkserver's options, nullopt when workers are exec'd (spawn, fork, --no_python, or
// restart recovery without --start_method=forkserver). A forkserver implied by
// forks_by_default() falls back to exec, with a warning, when its template cannot start.
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
