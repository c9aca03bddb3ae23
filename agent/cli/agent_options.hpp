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

// True when --recovery=inprocess forks Python workers from the forkserver because no
// --start_method (nor PET_START_METHOD) was given: a joining node's worker then starts with
// torch already imported (docs/elastic.md says why). An explicit --start_method wins.
bool forks_by_default(const LaunchConfig& config);

// The forkserver's options, nullopt when workers are exec'd (spawn, fork, --no_python, or
// restart recovery without --start_method=forkserver). A forkserver implied by
// forks_by_default() falls back to exec, with a warning, when its template cannot start.
std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config);

// --metrics_port and --metrics_addr with the job's identity for ddprun_info.
MetricsSpec metrics_spec(const LaunchConfig& config);

}  // namespace ddp::agent
