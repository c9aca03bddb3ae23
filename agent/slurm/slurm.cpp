// SLURM auto-detection from an srun task's environment: one ddprun per node, which then starts
// --nproc_per_node workers itself.
#include <algorithm>
#include <exception>
#include <initializer_list>
#include <string>

#include "agent/slurm/slurm.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

// master_port = kPortBase + job_id % kPortSpan: every node of a job derives the same port without
// talking, and it stays below the Linux ephemeral range (32768+) so it rarely collides.
constexpr int kPortBase = 20000;
constexpr int kPortSpan = 10000;

const std::string* lookup(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int to_int(const std::map<std::string, std::string>& env, const std::string& key) {
  const std::string* value = lookup(env, key);
  if (value == nullptr) return -1;
  // Why: SLURM_TASKS_PER_NODE looks like "2(x3)"; only the leading count matters here.
  const auto n = parse_leading_number<int>(*value);
  if (!n) throw ConfigError(key + "='" + *value + "' is not a number");
  return *n;
}

int first_int(const std::map<std::string, std::string>& env,
              std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    int n = to_int(env, key);
    if (n >= 0) return n;
  }
  return -1;
}

void reject_several_tasks_per_node(const std::map<std::string, std::string>& env, int nnodes) {
  int tasks_on_node = first_int(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  int ntasks = first_int(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  int local_id = first_int(env, {"SLURM_LOCALID"});
  bool several = tasks_on_node > 1 || local_id > 0 || (ntasks > 0 && nnodes > 0 && ntasks > nnodes);
  if (!several) return;
  int count = tasks_on_node > 1 ? tasks_on_node
                                : (ntasks > 0 && nnodes > 0 ? (ntasks + nnodes - 1) / nnodes : 2);
  throw ConfigError("srun started " + std::to_string(count) +
                    " ddprun tasks on this node; run one per node: srun --ntasks-per-node=1 ... "
                    "(ddprun starts --nproc_per_node workers itself)");
}

}  // namespace

std::optional<SlurmDefaults> detect_slurm(const std::map<std::string, std::string>& env) {
  const std::string* job_id = lookup(env, "SLURM_JOB_ID");
  if (job_id == nullptr) return std::nullopt;
  const std::string* step_id = lookup(env, "SLURM_STEP_ID");
  // Why: an sbatch batch script without srun runs on the first node only (its step is "batch"
  // or absent); there we launch a single-node job and leave multi-node to srun.
  bool in_step = step_id != nullptr && *step_id != "batch" && *step_id != "4294967294";

  SlurmDefaults out;
  const std::string* nodelist = nullptr;
  if (in_step) {
    out.nnodes = first_int(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
    if (out.nnodes < 1) out.nnodes = 1;
    reject_several_tasks_per_node(env, out.nnodes);
    out.node_rank = std::max(0, to_int(env, "SLURM_NODEID"));
    nodelist = lookup(env, "SLURM_STEP_NODELIST");
  }
  if (nodelist == nullptr) nodelist = lookup(env, "SLURM_JOB_NODELIST");
  if (nodelist == nullptr) nodelist = lookup(env, "SLURM_NODELIST");
  if (!in_step) {
    out.nnodes = 1;
    out.node_rank = 0;
    out.master_addr = "127.0.0.1";
  } else if (nodelist != nullptr) {
    out.master_addr = expand_hostlist(*nodelist).front();
  }
  const auto id = parse_number<unsigned long long>(*job_id);
  if (!id) throw ConfigError("SLURM_JOB_ID='" + *job_id + "' is not a number");
  out.master_port = kPortBase + static_cast<int>(*id % kPortSpan);
  out.run_id = "slurm-" + *job_id + (in_step ? "." + *step_id : "");
  out.summary = "SLURM job " + *job_id +
                (in_step ? " step " + *step_id : " batch script (no srun step)") +
                ": nnodes=" + std::to_string(out.nnodes) +
                " node_rank=" + std::to_string(out.node_rank) + " master=" + out.master_addr + ":" +
                std::to_string(out.master_port) + " run_id=" + out.run_id;
  return out;
}

}  // namespace ddp::agent
