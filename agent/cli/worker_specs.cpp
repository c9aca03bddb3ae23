// Worker command lines and environments. Everything here is a pure function of the config, the
// round and the parent's environment, so the agent, --dry_run and the tests share one truth.

#include "agent/cli/worker_specs.hpp"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <sstream>

#include "agent/stacks/stack_hook.hpp"
#include "common/progress_record.hpp"

namespace ddp::agent {
namespace {

// torchrun's --run_path runs the script with runpy inside a Python child. We exec the
// interpreter instead; with "-c", sys.argv is ["-c", script, args...], so dropping the first
// entry gives the script the argv it would see under "python script.py". The script's
// directory goes first on sys.path, as "python script.py" would put it.
constexpr const char* kRunPathProgram =
    "import os, runpy, sys; sys.argv = sys.argv[1:]; "
    "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0]))); "
    "runpy.run_path(sys.argv[0], run_name='__main__')";

constexpr std::string_view kLocalRank = "local_rank";

bool is_identifier_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string value_or(const std::map<std::string, std::string>& env, const std::string& key,
                     const std::string& fallback) {
  const auto it = env.find(key);
  return it == env.end() ? fallback : it->second;
}

// The device for a worker under --virtual_local_rank: entry `local_rank` of the parent's
// CUDA_VISIBLE_DEVICES list, else the local rank itself.
std::string visible_device(const std::map<std::string, std::string>& parent_env, int local_rank) {
  const auto it = parent_env.find("CUDA_VISIBLE_DEVICES");
  if (it != parent_env.end()) {
    std::stringstream list(it->second);
    std::string item;
    for (int index = 0; std::getline(list, item, ','); ++index) {
      if (index == local_rank) return item;
    }
  }
  return std::to_string(local_rank);
}

}  // namespace

std::string substitute_local_rank(const std::string& arg, int local_rank) {
  // Python's string.Template.safe_substitute(local_rank=n): "$$" -> "$"; "$local_rank" and
  // "${local_rank}" -> n when the identifier is exactly local_rank (so "$local_rank_x" stays);
  // every other "$..." is left as written.
  const std::string rank = std::to_string(local_rank);
  std::string out;
  std::size_t i = 0;
  while (i < arg.size()) {
    if (arg[i] != '$' || i + 1 >= arg.size()) {
      out += arg[i++];
      continue;
    }
    const char next = arg[i + 1];
    if (next == '$') {
      out += '$';
      i += 2;
    } else if (next == '{') {
      std::size_t end = i + 2;
      while (end < arg.size() && is_identifier_char(arg[end])) ++end;
      const std::string_view name(arg.data() + i + 2, end - (i + 2));
      if (end < arg.size() && arg[end] == '}' && name == kLocalRank) {
        out += rank;
        i = end + 1;
      } else {
        out += '$';
        ++i;
      }
    } else if (is_identifier_start(next)) {
      std::size_t end = i + 1;
      while (end < arg.size() && is_identifier_char(arg[end])) ++end;
      const std::string_view name(arg.data() + i + 1, end - (i + 1));
      out += name == kLocalRank ? rank : std::string(arg, i, end - i);
      i = end;
    } else {
      out += '$';
      ++i;
    }
  }
  return out;
}

std::vector<std::string> worker_argv(const LaunchConfig& config, int local_rank) {
  std::vector<std::string> argv;
  if (config.run_path) {
    argv = {config.python, "-u", "-c", kRunPathProgram, config.training_script};
  } else if (config.no_python) {
    argv = {config.training_script};
  } else if (config.module) {
    argv = {config.python, "-u", "-m", config.training_script};
  } else {
    argv = {config.python, "-u", config.training_script};
  }
  // python -m torch.distributed.launch without --use_env: the rank goes first, before the
  // script's own arguments (1.13 spells it --local_rank, the 2.x launcher --local-rank).
  if (config.legacy_launch && !config.use_env) {
    argv.push_back(fmt::format("--local{}rank={}", config.local_rank_dash ? '-' : '_', local_rank));
  }
  argv.insert(argv.end(), config.training_script_args.begin(), config.training_script_args.end());
  // torchrun templates the arguments, not the program it execs.
  for (std::size_t i = 1; i < argv.size(); ++i) {
    argv[i] = substitute_local_rank(argv[i], local_rank);
  }
  return argv;
}

std::string omp_num_threads_banner() {
  const std::string stars(41, '*');  // torchrun's width
  return fmt::format("{}\n{}\n{}\n", stars, kOmpNumThreadsWarning, stars);
}

void apply_numa_bindings(const std::vector<NumaBinding>& bindings, std::vector<WorkerSpec>& specs) {
  for (WorkerSpec& spec : specs) {
    const auto rank = static_cast<std::size_t>(spec.local_rank);
    if (rank < bindings.size()) spec.numa = bindings[rank];
  }
}

bool sets_omp_num_threads(const LaunchConfig& config,
                          const std::map<std::string, std::string>& parent_env) {
  return config.nproc_per_node > 1 && parent_env.count("OMP_NUM_THREADS") == 0;
}

std::vector<WorkerSpec> make_worker_specs(const LaunchConfig& config,
                                          const rdzv::RendezvousInfo& info,
                                          const std::map<std::string, std::string>& parent_env,
                                          const std::string& attempt_dir) {
  const std::string run_id = info.run_id.empty() ? config.rdzv_id : info.run_id;
  std::vector<WorkerSpec> specs;
  specs.reserve(static_cast<std::size_t>(config.nproc_per_node));
  for (int local_rank = 0; local_rank < config.nproc_per_node; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.rank = info.rank_base + local_rank;
    spec.role_rank = spec.rank;  // one role per job: role ranks are the global ranks
    spec.argv = worker_argv(config, local_rank);
    spec.log_dir = worker_log_dir(attempt_dir, local_rank);
    const std::filesystem::path dir(spec.log_dir);
    spec.stdout_path = (dir / "stdout.log").string();
    spec.stderr_path = (dir / "stderr.log").string();
    spec.error_file = (dir / "error.json").string();
    spec.tee_mask = config.tee.mask_for(local_rank);
    spec.redirect_mask = config.redirects.mask_for(local_rank) | spec.tee_mask;
    spec.console_visible =
        !config.local_ranks_filter || config.local_ranks_filter->count(local_rank) != 0;

    auto& set = spec.ddprun_env;
    set["LOCAL_RANK"] = config.virtual_local_rank ? "0" : std::to_string(local_rank);
    set["RANK"] = std::to_string(spec.rank);
    set["GROUP_RANK"] = std::to_string(info.group_rank);
    set["ROLE_RANK"] = std::to_string(spec.role_rank);
    set["ROLE_NAME"] = config.role;
    set["LOCAL_WORLD_SIZE"] = std::to_string(config.nproc_per_node);
    set["WORLD_SIZE"] = std::to_string(info.world_size);
    set["GROUP_WORLD_SIZE"] = std::to_string(info.group_world_size);
    set["ROLE_WORLD_SIZE"] = std::to_string(info.world_size);
    set["MASTER_ADDR"] = info.master_addr;
    set["MASTER_PORT"] = std::to_string(info.master_port);
    set["TORCHELASTIC_RESTART_COUNT"] = std::to_string(info.restart_count);
    set["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(config.max_restarts);
    set["TORCHELASTIC_RUN_ID"] = run_id;
    // Our workers always meet in the agent's store (1.13 static and newest torchrun behaviour).
    set["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    set["TORCHELASTIC_ERROR_FILE"] = spec.error_file;
    set["TORCHELASTIC_SIGNALS_TO_HANDLE"] = config.signals_to_handle_raw;
    // 1.13 reads the first name, newest the second; set both so either torch sees it.
    set["NCCL_ASYNC_ERROR_HANDLING"] = value_or(parent_env, "NCCL_ASYNC_ERROR_HANDLING", "1");
    set["TORCH_NCCL_ASYNC_ERROR_HANDLING"] =
        value_or(parent_env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
    if (sets_omp_num_threads(config, parent_env)) set["OMP_NUM_THREADS"] = "1";
    // Stacks on demand and hang detection (docs/agent.md): the Python hook, the progress file.
    add_stack_hook_env(set, parent_env, std::filesystem::path(attempt_dir).parent_path().string(),
                       spec.log_dir);
    set[kProgressFileEnv] = (dir / "progress").string();
    if (config.virtual_local_rank) {
      set["CUDA_VISIBLE_DEVICES"] = visible_device(parent_env, local_rank);
    }

    std::map<std::string, std::string> full = parent_env;
    for (const auto& [key, value] : set) full[key] = value;
    spec.env.reserve(full.size());
    for (const auto& [key, value] : full) spec.env.push_back(key + "=" + value);
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace ddp::agent
