#pragma once
// WorkerSpec: what the agent execs for one local worker of one attempt: argv, the complete
// environment, where its output and error file go, and its NUMA placement. The parts below the
// command line (process, stacks, the agent's core) take these; cli/worker_specs.hpp builds them.

#include <map>
#include <set>
#include <string>
#include <vector>

namespace ddp::agent {

// Bits of one local rank's output mask, torchrun's Std values (--redirects, --tee).
inline constexpr int kStdNone = 0;
inline constexpr int kStdOut = 1;
inline constexpr int kStdErr = 2;
inline constexpr int kStdBoth = kStdOut | kStdErr;

// One worker's placement: the CPUs it may run on and the NUMA node its memory should come from.
struct NumaBinding {
  std::set<int> cpus;
  int memory_node = -1;
};

struct WorkerSpec {
  int local_rank = 0;
  int rank = 0;       // global rank (RANK)
  int role_rank = 0;  // ROLE_RANK (one role: equals rank)
  // argv[0] is the program: a path, or a bare name the spawner resolves through PATH (execvp).
  std::vector<std::string> argv;
  // The full environment, "KEY=VALUE", sorted by key: the parent's plus ddprun's variables.
  std::vector<std::string> env;
  // Only the variables ddprun set or changed, by name (dry run, tests, reports).
  std::map<std::string, std::string> ddprun_env;

  std::string log_dir;      // <attempt_dir>/<local_rank>
  std::string stdout_path;  // <log_dir>/stdout.log (used when redirect_mask has kStdOut)
  std::string stderr_path;  // <log_dir>/stderr.log (used when redirect_mask has kStdErr)
  std::string error_file;   // <log_dir>/error.json = TORCHELASTIC_ERROR_FILE (worker writes it)
  int redirect_mask = kStdNone;  // streams written to their files (redirects | tee)
  int tee_mask = kStdNone;       // of those, streams also copied to the console
  bool console_visible = true;   // false when --local_ranks_filter excludes this rank
  NumaBinding numa;              // --numa_binding: CPUs and memory node (empty cpus: unbound)
};

}  // namespace ddp::agent
