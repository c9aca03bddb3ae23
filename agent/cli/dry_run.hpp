#pragma once
// --dry_run: prints the resolved LaunchConfig (with where SLURM values came from) and, for a
// single-node/static first round, each local worker's shell-quoted command line and the
// variables ddprun sets for it. Starts nothing, creates no file.

#include <map>
#include <ostream>
#include <string>

#include "agent/cli/launch_config.hpp"

namespace ddp::agent {

// Writes the dry-run report to `out`. `parent_env` is ddprun's environment (for the inherited
// values the workers' variables depend on). MASTER_PORT shows the static store's port
// (--rdzv_endpoint=H:P, else --master_port) or "<free port chosen at launch>"; log paths show
// "<log_dir>" placeholders; --numa_binding adds each worker's CPUs.
void print_dry_run(const LaunchConfig& config, const std::map<std::string, std::string>& parent_env,
                   std::ostream& out);

// Quotes `word` for a POSIX shell (unchanged when it needs no quoting).
std::string shell_quote(const std::string& word);

}  // namespace ddp::agent
