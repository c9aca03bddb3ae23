#pragma once
// AgentSpec: what the elastic agent's loop reads (restarts, timeouts, recovery mode, output and
// log settings, the workers of each round), and WorkerPlan, the interface that turns a round into
// this node's WorkerSpecs. agent/cli fills both from the LaunchConfig (cli/agent_options.hpp);
// the agent never sees the LaunchConfig.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/core/worker_spec.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// The workers this node starts for a round. Pure: computing specs touches no process or file.
class WorkerPlan {
 public:
  virtual ~WorkerPlan() = default;
  // The specs of local ranks 0..nproc_per_node-1 for the round in `info` (a default-constructed
  // info: the forkserver template's spec, which no round decides), with their logs under
  // `attempt_dir` and their NUMA placement.
  virtual std::vector<WorkerSpec> specs(const rdzv::RendezvousInfo& info,
                                        const std::string& attempt_dir) const = 0;
};

struct AgentSpec {
  // ddprun's environment (TMPDIR for the temporary log base).
  std::map<std::string, std::string> parent_env;
  std::shared_ptr<const WorkerPlan> workers;  // never null
  int nproc_per_node = 1;
  int max_restarts = 0;
  std::vector<int> signals_to_handle;                 // besides SIGINT, SIGTERM and SIGHUP
  std::chrono::milliseconds shutdown_timeout{30000};  // stop signal to SIGKILL
  std::chrono::milliseconds hang_timeout{0};          // 0: no hang detection
  bool inprocess_recovery = false;                    // --recovery=inprocess
  std::chrono::milliseconds reform_timeout{0};        // its hand-over's limit
  std::optional<std::string> log_dir;                 // nullopt: a fresh temporary base
  std::string run_id;
  // Console output: --label, the tee prefix template, --duplicate_std{out,err}_filters.
  bool label = false;
  std::string log_line_prefix_template;
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  // torchrun's OMP_NUM_THREADS warning block, printed once on stderr at warning level when
  // ddprun sets OMP_NUM_THREADS=1 for the workers; empty otherwise.
  std::string omp_num_threads_banner;
  // The store stack requests and hang peers go through: the rendezvous store when it has a known
  // port (c10d); nullopt: each round's workers' store (master_addr:master_port).
  std::optional<std::pair<std::string, std::uint16_t>> rendezvous_store;
  // The failure report's words: the entrypoint, the interpreter Python workers ran under and how
  // it was chosen (both empty for --no_python).
  std::string entrypoint;
  std::string interpreter;
  std::string interpreter_choice;
};

}  // namespace ddp::agent
