#pragma once
// The WorkerSpecs of one attempt from the LaunchConfig and the round: argv, the complete
// environment (torchrun's variables over the parent's), and where output and error files go.
// Pure: computing specs touches no process and no file.

#include <map>
#include <string>
#include <vector>

#include "agent/cli/launch_config.hpp"
#include "agent/cli/log_dirs.hpp"
#include "agent/cli/numa_binding.hpp"
#include "agent/core/worker_spec.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// The specs of this node's workers (local ranks 0..nproc_per_node-1) for the round in `info`.
// `parent_env` is ddprun's environment; `attempt_dir` is attempt_log_dir(run_dir, restart).
// Worker variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// GROUP_WORLD_SIZE, ROLE_NAME, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_{RESTART_COUNT,MAX_RESTARTS,RUN_ID,USE_AGENT_STORE=True,ERROR_FILE,
// SIGNALS_TO_HANDLE}, NCCL_ASYNC_ERROR_HANDLING and TORCH_NCCL_ASYNC_ERROR_HANDLING (parent's,
// else 1), OMP_NUM_THREADS=1 when unset and nproc_per_node > 1, and with --virtual_local_rank
// LOCAL_RANK=0 plus CUDA_VISIBLE_DEVICES=<the rank's device>; for stacks and hang detection
// DDPRUN_STACK_SIGNAL, DDPRUN_STACK_DIR (the worker's log dir), PYTHONPATH (<run_dir>/python
// first) and DDPRUN_PROGRESS_FILE (<log dir>/progress). Never throws for a parsed config.
std::vector<WorkerSpec> make_worker_specs(const LaunchConfig& config,
                                          const rdzv::RendezvousInfo& info,
                                          const std::map<std::string, std::string>& parent_env,
                                          const std::string& attempt_dir);

// Sets each spec's `numa` from `bindings` (numa_bindings_for(); by local rank, empty: none).
void apply_numa_bindings(const std::vector<NumaBinding>& bindings, std::vector<WorkerSpec>& specs);

// The worker command line for `local_rank`: python modes, -m, --no_python, --run_path, with
// "$local_rank"/"${local_rank}" replaced and "$$" turned into "$" in every argument but argv[0].
// Under ddprun-launch without --use_env, "--local_rank=N" (or "--local-rank=N") comes right
// after the script or module, before its own arguments.
std::vector<std::string> worker_argv(const LaunchConfig& config, int local_rank);

// Python string.Template.safe_substitute(local_rank=...) as torchrun applies it to arguments.
std::string substitute_local_rank(const std::string& arg, int local_rank);

// torchrun's warning text (its logger prints it between lines of '*'), for the agent to log once
// when sets_omp_num_threads() is true.
inline constexpr const char* kOmpNumThreadsWarning =
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed.";

// kOmpNumThreadsWarning between two lines of '*', newline-terminated: the block the agent prints
// on stderr at warning level.
std::string omp_num_threads_banner();

// True when ddprun sets OMP_NUM_THREADS=1 for the workers (unset in `parent_env` and
// nproc_per_node > 1); the agent then logs torchrun's warning once.
bool sets_omp_num_threads(const LaunchConfig& config,
                          const std::map<std::string, std::string>& parent_env);

}  // namespace ddp::agent
