#pragma once
// The narrow options the parts below the command line take, read off the LaunchConfig: the
// elastic agent's AgentSpec and WorkerPlan (core), the forkserver's (process), the stack store's
// (stacks) and the metrics' (core). Pure, but for resolving the interpreter through PATH.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "agent/cli/launch_config.hpp"
#include "agent/core/agent_metrics.hpp"
#include "agent/core/agent_spec.hpp"
#include "agent/process/forkserver.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// What the elastic agent runs for `config`; `parent_env` is ddprun's environment (the workers'
// base environment, TMPDIR, the PATH the interpreter is resolved through). Its WorkerPlan keeps
// a copy of `config`.
AgentSpec agent_spec(const LaunchConfig& config, std::map<std::string, std::string> parent_env);

// The forkserver's options, nullopt when workers are exec'd (spawn, fork, --no_python).
std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config);

// --metrics_port and --metrics_addr with the job's identity for ddprun_info.
MetricsSpec metrics_spec(const LaunchConfig& config);

}  // namespace ddp::agent
