#pragma once
// The run id a multi-node c10d or etcd job gets when no --rdzv_id is given: a hash of the launch
// command, so that the nodes of one job agree on it and two jobs at one endpoint differ.

#include <string>

#include "agent/cli/launch_config.hpp"

namespace ddp::agent {

// "job-" and 12 hex digits of an FNV-1a 64 hash over the endpoint, --nnodes, --role, the entry
// mode, the script and its arguments. --nproc_per_node is left out: nodes may resolve "auto" or
// "gpu" differently.
std::string run_id_hash(const LaunchConfig& config);

}  // namespace ddp::agent
