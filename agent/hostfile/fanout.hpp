#pragma once
// `ddprun --hostfile`: from the command line to the job on every host. main() calls these when
// LaunchConfig::hostfile is set, instead of running an agent here.

#include <map>
#include <string>
#include <vector>

#include "agent/cli/launch_config.hpp"
#include "agent/hostfile/fanout_plan.hpp"

namespace ddp::agent {

// Reads the hostfile, applies --include/--exclude and plans each host's launch (working
// directory, this ddprun's path, a fresh c10d run id). Throws ConfigError for what the user must
// fix (unreadable file, duplicated host, bad flag combination).
std::vector<RemoteLaunch> plan_hostfile_launch(const LaunchConfig& config, int argc,
                                               const char* const* argv,
                                               const std::map<std::string, std::string>& env);

// Runs the launches until every host has ended; returns ddprun's exit code
// (FanoutSupervisor). `env` is the environment ssh gets.
int run_hostfile_launch(const LaunchConfig& config, std::vector<RemoteLaunch> launches,
                        const std::map<std::string, std::string>& env);

}  // namespace ddp::agent
