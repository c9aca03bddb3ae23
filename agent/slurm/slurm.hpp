#pragma once
// SLURM auto-detection: what ddprun can fill in from the environment of an srun task, and the
// native parser of SLURM hostlist expressions ("node[01-04,07]"), as `scontrol show hostnames`.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::agent {

// What an srun task (one per node) tells us. Every field is filled when detection succeeds;
// LaunchConfig uses each one only where the user gave no flag (or PET_* variable).
struct SlurmDefaults {
  int nnodes = 1;             // the step's node count (SLURM_STEP_NUM_NODES, else SLURM_NNODES)
  int node_rank = 0;          // SLURM_NODEID
  std::string master_addr;    // first host of SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST
  int master_port = 0;        // derived from the job id: stable across nodes, unprivileged range
  std::string run_id;         // "slurm-<job id>[.<step id>]"
  std::string summary;        // one line for the info log and --dry_run
};

// Returns the defaults when SLURM_JOB_ID is set in `env` and this is one task per node; nullopt
// outside SLURM. Throws ConfigError with the fix when srun started several ddprun tasks per node.
std::optional<SlurmDefaults> detect_slurm(const std::map<std::string, std::string>& env);

// Expands a hostlist expression into host names in order. Throws ConfigError on a malformed one.
std::vector<std::string> expand_hostlist(std::string_view expression);

}  // namespace ddp::agent
