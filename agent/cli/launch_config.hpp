#pragma once
// LaunchConfig: everything ddprun was asked to do, parsed once from torchrun's command line, the
// PET_* environment fallbacks and SLURM detection, then never changed. Owned by main(); the agent
// reads it. Parsing rules and every flag: docs/cli.md.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/cli/endpoint.hpp"
#include "agent/cli/rdzv_conf.hpp"
#include "agent/cli/std_streams.hpp"
#include "agent/mpi/mpi.hpp"
#include "agent/slurm/slurm.hpp"

namespace ddp::agent {

// Where a value came from, for --dry_run and the startup log. CLI beats env beats SLURM (or
// mpirun) beats the default.
enum class ValueSource { kDefault, kCli, kEnv, kSlurm, kDerived, kMpi };
const char* to_string(ValueSource source);

struct LaunchConfig {
  // --- help: set when -h/--help came before the script; nothing else is filled or validated.
  bool help = false;
  bool version = false;  // --version, as help: nothing else is filled
  std::optional<std::string> print_completion;  // --print_completion SHELL, as help

  // --- legacy launcher (argv[0] is ddprun-launch: python -m torch.distributed.launch)
  bool legacy_launch = false;
  bool use_env = false;           // --use_env: no --local_rank argument for the workers
  bool local_rank_dash = false;   // --local_rank_arg=dash: "--local-rank=N" (torch 2.x launcher)

  // --- nodes and workers
  std::string nnodes_raw = "1:1";  // --nnodes as given ("N" or "MIN:MAX")
  int nnodes_min = 1;
  int nnodes_max = 1;                    // static uses this as the node count
  std::string nproc_per_node_raw = "1";  // --nproc_per_node as given: int | gpu | cpu | auto
  int nproc_per_node = 1;                // resolved, > 0

  // --- rendezvous
  std::string rdzv_backend = "static";  // static | c10d | etcd (etcd-v2, etcd-v3: the same)
  std::string rdzv_endpoint_raw;        // --rdzv_endpoint as given (or "localhost:0" standalone)
  // Where the rendezvous store listens. c10d: default port 29400 (":0" with --standalone = any
  // free port). static: as torchrun, --rdzv_endpoint if given (port required), else
  // master_addr:master_port (port unset when master_port is unset: pick a free one).
  Endpoint rdzv_endpoint;
  // TORCHELASTIC_RUN_ID. Given --rdzv_id wins. Else: static "none" (as torchrun); c10d on one
  // node (or --standalone) a fresh uuid so two jobs never merge; c10d multi-node
  // "job-<hash of the command>" (every node derives the same); SLURM "slurm-<job>[.<step>]".
  std::string rdzv_id = "none";
  RdzvConf rdzv_conf;  // "timeout" always present; static also carries "rank" = node_rank
  bool standalone = false;
  int node_rank = 0;                      // static only; 0 <= node_rank < nnodes_max
  std::string master_addr = "127.0.0.1";  // static only
  // static only. nullopt: one node, the agent picks a free port. Multi-node without a flag: 29500.
  std::optional<int> master_port;
  std::optional<std::string> local_addr;  // --local_addr: this node's address

  // --- supervision
  int max_restarts = 0;
  std::chrono::milliseconds monitor_interval{5000};  // accepted; the agent is event-driven
  // spawn | fork: workers are exec'd. forkserver: Python workers fork from a template per node
  // that imported `preload` first (agent/process/forkserver.hpp); --no_python still execs.
  std::string start_method = "spawn";
  std::vector<std::string> preload{"torch"};  // --preload / PET_PRELOAD, comma-separated
  bool preload_fallback = false;  // --preload_fallback: exec (with a warning) if the template fails
  std::string role = "default";
  std::vector<int> signals_to_handle;  // signal numbers, default SIGTERM,SIGINT,SIGHUP,SIGQUIT
  std::string signals_to_handle_raw = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";  // exported to workers
  // Stop signal to SIGKILL. --shutdown_timeout, else $TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s.
  std::chrono::milliseconds shutdown_timeout{30000};
  // new: --hang_timeout (or PET_HANG_TIMEOUT): a rank without progress that long while others
  // wait in a later collective, or stopped that long, is reported and fails the attempt. 0 = off.
  std::chrono::milliseconds hang_timeout{0};
  // new: --recovery (or PET_RECOVERY): "restart" stops and restarts the workers on every round
  // change; "inprocess" hands live workers their place in the next round (docs/agent.md).
  std::string recovery = "restart";

  // --- entry point
  bool module = false;     // -m: <python> -u -m <training_script> args
  bool no_python = false;  // exec training_script directly (PATH lookup if it has no '/')
  bool run_path = false;   // emulated: <python> -u -c "<runpy.run_path one-liner>" script args
  // Interpreter for python modes: --python, else $PYTHON_EXEC, else "python3" (PATH lookup).
  std::string python = "python3";
  std::string training_script;
  std::vector<std::string> training_script_args;  // untouched, except a leading "--" removed

  // --- logs and events
  std::optional<std::string> log_dir;  // base of per-run log dirs; nullopt: a fresh temp dir
  StdStreams redirects;                // files only
  StdStreams tee;                      // files and console (implies redirect)
  std::optional<std::set<int>> local_ranks_filter;  // console shows only these; nullopt: all
  std::string log_line_prefix_template;  // or $TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; "" default
  std::vector<std::string> duplicate_stdout_filters;  // lines also copied to filtered_stdout.log
  std::vector<std::string> duplicate_stderr_filters;
  std::string event_log_handler = "null";  // torchrun's plug-in name; only "null" is supported
  std::optional<std::string> logs_specs;   // torchrun plug-in; not supported
  std::optional<std::string> event_log;    // new: JSON-lines event file
  bool label = false;                      // new: "[host:rank]" prefix on console lines
  std::string log_level;                   // new: "" means SPDLOG_LEVEL, else warn (quiet)

  // --- metrics (new): Prometheus /metrics on this port (0 = off) and address ("" = every one)
  int metrics_port = 0;
  std::string metrics_addr;

  // --- devices
  bool virtual_local_rank = false;          // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES=<its GPU>
  // node|socket|exclusive|core-complex (core_complex accepted): agent/cli/numa_binding.hpp
  std::optional<std::string> numa_binding;

  // --- ddprun only
  bool dry_run = false;                // print workers' command lines and env, start nothing
  bool no_slurm = false;               // ignore SLURM_* variables
  std::optional<SlurmDefaults> slurm;  // what detection found (nullopt: not in SLURM / disabled)
  bool no_mpi = false;                 // ignore mpirun's OMPI_* variables
  std::optional<MpiDefaults> mpi;      // mpirun detection (it wins over SLURM's)

  // --- --hostfile fan-out (docs/hostfile.md): this ddprun starts one agent per host over ssh
  std::optional<std::string> hostfile;  // --hostfile / PET_HOSTFILE ("" counts as not given)
  std::string ssh = "ssh -o BatchMode=yes";  // --ssh: the command before the host (split at spaces)
  std::optional<std::string> remote_ddprun;  // --remote_ddprun; nullopt: this ddprun's own path
  std::string export_vars;                   // --export VAR[,VAR=VALUE...], as given
  std::string include_hosts;                 // --include host[,host]
  std::string exclude_hosts;                 // --exclude host[,host]
  bool stdin_signals = false;  // remote agents: stdin lines name signals; EOF acts as SIGHUP

  // Where each option's value came from, by torchrun's dest name ("nproc_per_node", ...).
  std::map<std::string, ValueSource> sources;

  bool is_single_node() const { return nnodes_max == 1; }
  ValueSource source_of(const std::string& dest) const;

  // Features parsed and validated but not implemented: one "… is not supported yet" message per
  // requested feature (e.g. --log_dir=/dev/null). The agent fails with them at run
  // time.
  std::vector<std::string> unsupported_features() const;
};

// Parses ddprun's command line (argv[0] is the program) with `env` as the process environment.
// Options end at the training script; everything after it goes to the worker untouched (a "--"
// right after the script is removed, as torchrun 1.13). Long options accept both spellings and
// unique prefixes (argparse rules). SLURM values come from detect_slurm(env) unless --no_slurm or
// --standalone. Throws ConfigError with one line naming the flag (and the PET_* variable when the
// value came from there). Returns help=true for -h/--help. Under mpirun (OMPI_COMM_WORLD_*),
// unless --no_mpi, --standalone or --hostfile, detect_mpi(env) fills what is unset instead of
// SLURM; across hosts task 0 must run on mpirun's host unless --master_addr is given.
LaunchConfig parse_launch_config(int argc, const char* const* argv,
                                 const std::map<std::string, std::string>& env);

// The same with another SLURM detector (tests pass a fake; production uses detect_slurm).
using SlurmDetector =
    std::function<std::optional<SlurmDefaults>(const std::map<std::string, std::string>&)>;
LaunchConfig parse_launch_config(int argc, const char* const* argv,
                                 const std::map<std::string, std::string>& env,
                                 const SlurmDetector& detect);

// The environment as a map, from a null-terminated "KEY=VALUE" array (main passes `environ`).
// Entries without '=' are skipped; for a repeated key the first entry wins, as getenv() sees it.
std::map<std::string, std::string> environment_from(const char* const* envp);

// Logs the SLURM detection summary (when any) and a one-line config summary (with the
// interpreter of Python entry points) at info on the "agent" logger. main() calls it after
// applying --log_level; parsing itself never logs.
void log_launch_config(const LaunchConfig& config);

// The --help text (ddprun-launch's when `legacy_launch`).
std::string usage(bool legacy_launch = false);

// The --version line: "<program> <version> (...)".
std::string version_text(bool legacy_launch, const char* version);

// The name torchrun's failure report uses for the job: the script or module name; with
// --no_python the command as given; with --run_path "run_script_path".
std::string entrypoint_name(const LaunchConfig& config);

}  // namespace ddp::agent
