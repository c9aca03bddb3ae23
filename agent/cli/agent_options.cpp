// LaunchConfig -> the options of the elastic agent and of the process, stacks and metrics parts.

#include "agent/cli/agent_options.hpp"

#include <exception>
#include <vector>

#include "agent/cli/numa_binding.hpp"
#include "agent/cli/worker_specs.hpp"
#include "agent/process/process_spawner.hpp"

namespace ddp::agent {
namespace {

// The workers of a round as the command line asks for them (cli/worker_specs.hpp), placed by
// --numa_binding.
class LaunchWorkerPlan final : public WorkerPlan {
 public:
  LaunchWorkerPlan(LaunchConfig config, std::map<std::string, std::string> parent_env)
      : config_(std::move(config)), parent_env_(std::move(parent_env)) {}

  std::vector<WorkerSpec> specs(const rdzv::RendezvousInfo& info,
                                const std::string& attempt_dir) const override {
    auto specs = make_worker_specs(config_, info, parent_env_, attempt_dir);
    apply_numa_bindings(numa_bindings_for(config_, parent_env_), specs);
    return specs;
  }

 private:
  const LaunchConfig config_;
  const std::map<std::string, std::string> parent_env_;
};

// The interpreter Python workers exec: config.python through the PATH of `env`.
std::string resolved_interpreter(const LaunchConfig& config,
                                 const std::map<std::string, std::string>& env) {
  std::vector<std::string> env_entries;
  if (const auto path = env.find("PATH"); path != env.end()) {
    env_entries.push_back("PATH=" + path->second);
  }
  try {
    return ExecImage({config.python}, env_entries).program();
  } catch (const std::exception&) {
    return config.python;
  }
}

// How the interpreter was chosen, in the words of the failure report's note.
std::string interpreter_choice(const LaunchConfig& config,
                               const std::map<std::string, std::string>& env) {
  switch (config.source_of("python")) {
    case ValueSource::kCli:
      return "--python";
    case ValueSource::kEnv: {
      const auto pet = env.find("PET_PYTHON");
      return pet != env.end() && pet->second == config.python ? "PET_PYTHON" : "PYTHON_EXEC";
    }
    default:
      return "python3 on PATH";
  }
}

// The store stack requests go through, the one ddprun-stacks is pointed at, when it is not the
// round's: c10d, the rendezvous store at --rdzv_endpoint (each round's workers get a store of
// their own). nullopt: the job's store (master_addr:master_port, as workers see it) for static,
// and for c10d when the endpoint's port was left to the system (--standalone).
std::optional<std::pair<std::string, std::uint16_t>> rendezvous_store_of(
    const LaunchConfig& config) {
  if (config.rdzv_backend != "c10d" || config.rdzv_endpoint.port.value_or(29400) == 0) {
    return std::nullopt;
  }
  return std::make_pair(config.rdzv_endpoint.host,
                        static_cast<std::uint16_t>(config.rdzv_endpoint.port.value_or(29400)));
}

}  // namespace

AgentSpec agent_spec(const LaunchConfig& config, std::map<std::string, std::string> parent_env) {
  AgentSpec spec;
  spec.nproc_per_node = config.nproc_per_node;
  spec.max_restarts = config.max_restarts;
  spec.signals_to_handle = config.signals_to_handle;
  spec.shutdown_timeout = config.shutdown_timeout;
  spec.hang_timeout = config.hang_timeout;
  spec.inprocess_recovery = config.recovery == "inprocess";
  spec.reform_timeout = config.rdzv_conf.reform_timeout();
  spec.log_dir = config.log_dir;
  spec.run_id = config.rdzv_id;
  spec.label = config.label;
  spec.log_line_prefix_template = config.log_line_prefix_template;
  spec.duplicate_stdout_filters = config.duplicate_stdout_filters;
  spec.duplicate_stderr_filters = config.duplicate_stderr_filters;
  if (sets_omp_num_threads(config, parent_env))
    spec.omp_num_threads_banner = omp_num_threads_banner();
  spec.rendezvous_store = rendezvous_store_of(config);
  spec.entrypoint = entrypoint_name(config);
  if (!config.no_python) {
    spec.interpreter = resolved_interpreter(config, parent_env);
    spec.interpreter_choice = interpreter_choice(config, parent_env);
  }
  spec.workers = std::make_shared<LaunchWorkerPlan>(config, parent_env);
  spec.parent_env = std::move(parent_env);
  return spec;
}

bool forks_by_default(const LaunchConfig& config) {
  return config.recovery == "inprocess" &&
         config.source_of("start_method") == ValueSource::kDefault;
}

std::optional<ForkServerOptions> forkserver_options(const LaunchConfig& config) {
  const bool implied = forks_by_default(config);
  if ((config.start_method != "forkserver" && !implied) || config.no_python) return std::nullopt;
  // A template the user did not ask for must not fail a launch that exec would run (a Python
  // without torch, an import that initialises CUDA): it falls back to exec with a warning.
  return ForkServerOptions{.python = config.python,
                           .preload = config.preload,
                           .fallback = config.preload_fallback || implied,
                           .by_default = implied};
}

MetricsSpec metrics_spec(const LaunchConfig& config) {
  return MetricsSpec{.run_id = config.rdzv_id,
                     .rdzv_backend = config.rdzv_backend,
                     .role = config.role,
                     .max_restarts = config.max_restarts,
                     .nproc_per_node = config.nproc_per_node,
                     .addr = config.metrics_addr,
                     .port = config.metrics_port};
}

}  // namespace ddp::agent
