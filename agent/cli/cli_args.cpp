// The option table, argparse-compatible tokenizing, and PET_* fallbacks.
//
// Why a scanner and not CLI11's parser: torchrun's parser is argparse with allow_abbrev and
// REMAINDER, and drop-in use depends on its rules. Options end at the first positional (the
// script), so a worker's own "--nproc=3" must never be read as ours; unique prefixes ("--nproc",
// "--max_r") must resolve; "--log_dir=" with an empty value is a value. CLI11 2.1 can do none of
// these, so it renders --help from the same table and the scanner below parses.

#include "agent/cli/cli_args.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <optional>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

struct OptionDef {
  const char* dest;  // torchrun's argparse dest; "--<dest>" is the underscore spelling
  char short_name;   // 'r' for -r, or 0
  bool takes_value;  // false: a flag
  bool has_env;      // PET_<DEST> fallback (torchrun has none for numa_binding, logs_specs)
  const char* help;
};

constexpr OptionDef kOptions[] = {
    {"nnodes", 0, true, true, "Number of nodes, N or MIN:MAX (default 1:1)."},
    {"nproc_per_node", 0, true, true,
     "Workers per node: an integer, gpu, cpu or auto (default 1)."},
    {"rdzv_backend", 0, true, true, "Rendezvous backend: static (default), c10d or etcd."},
    {"rdzv_endpoint", 0, true, true, "Rendezvous endpoint host[:port] or [v6addr][:port]."},
    {"rdzv_id", 0, true, true, "Run id shared by all nodes (TORCHELASTIC_RUN_ID)."},
    {"rdzv_conf", 0, true, true, "Rendezvous settings k1=v1,k2=v2 (join_timeout, ...)."},
    {"standalone", 0, false, true, "Single node: c10d rendezvous on a free local port, fresh id."},
    {"max_restarts", 0, true, true, "Worker-group restarts before failing (default 0)."},
    {"monitor_interval", 0, true, true, "Accepted for compatibility; ddprun is event-driven."},
    {"start_method", 0, true, true,
     "spawn or fork: exec each worker; forkserver: fork Python workers from a template."},
    {"preload", 0, true, true, "With forkserver: modules the template imports (default torch)."},
    {"preload_fallback", 0, false, true,
     "With forkserver: exec the workers (with a warning) if the template cannot start."},
    {"role", 0, true, true, "Worker role name, ROLE_NAME (default 'default')."},
    {"module", 'm', false, true, "Run the script as a Python module: <python> -u -m <module>."},
    {"no_python", 0, false, true, "Exec the script directly instead of through Python."},
    {"run_path", 0, false, true, "Run the script with runpy.run_path in <python> -c."},
    {"log_dir", 0, true, true, "Base directory for per-attempt, per-rank logs."},
    {"redirects", 'r', true, true, "Redirect output to files: 0-3 or 0:1,1:2 (1 out, 2 err)."},
    {"tee", 't', true, true, "Tee output to files and console: 0-3 or 0:1,1:2."},
    {"node_rank", 0, true, true, "This node's rank for the static backend (default 0)."},
    {"master_addr", 0, true, true, "Store address for the static backend (default 127.0.0.1)."},
    {"master_port", 0, true, true,
     "Store port for static (default: free port on one node, 29500)."},
    {"local_addr", 0, true, true, "This node's address."},
    {"local_ranks_filter", 0, true, true, "Only these local ranks reach the console, e.g. 0,2."},
    {"log_line_prefix_template", 0, true, true, "Prefix template for console lines."},
    {"duplicate_stdout_filters", 0, true, true, "Also copy stdout lines containing these."},
    {"duplicate_stderr_filters", 0, true, true, "Also copy stderr lines containing these."},
    {"event_log_handler", 0, true, true, "torchrun event-log handler name (only 'null')."},
    {"logs_specs", 0, true, false, "torchrun logs-specs plug-in (not supported)."},
    {"numa_binding", 0, true, false,
     "Bind workers to CPUs near their GPU: node, socket, exclusive or core-complex."},
    {"signals_to_handle", 0, true, true, "Signals forwarded to workers (SIGTERM,SIGINT,...)."},
    {"shutdown_timeout", 0, true, true, "Seconds from stop signal to SIGKILL (default 30)."},
    {"hang_timeout", 0, true, true,
     "Seconds without progress after which a rank counts as hung (default 0: off)."},
    {"recovery", 0, true, true,
     "On a round change: restart (default) the workers, or inprocess: hand live ones the round."},
    {"virtual_local_rank", 0, false, true, "LOCAL_RANK=0 and one CUDA device per worker."},
    {"python", 0, true, true, "Python interpreter (default $PYTHON_EXEC, else python3)."},
    {"event_log", 0, true, true, "Write JSON-lines events to this file."},
    {"label", 0, false, true, "Prefix console lines with [host:rank]."},
    {"dry_run", 0, false, true, "Print each worker's command line and environment; start nothing."},
    {"log_level", 0, true, true, "trace, debug, info, warn, error, critical or off."},
    {"no_slurm", 0, false, true, "Ignore SLURM_* variables."},
    {"no_mpi", 0, false, true, "Ignore mpirun's OMPI_COMM_WORLD_* variables."},
    {"hostfile", 0, true, true, "Start the job on every host of FILE over ssh (host [slots=N])."},
    {"ssh", 0, true, true, "With --hostfile: ssh command (default 'ssh -o BatchMode=yes')."},
    {"remote_ddprun", 0, true, true, "With --hostfile: ddprun's path on the hosts (default ours)."},
    {"export", 0, true, true, "With --hostfile: also forward VAR[,VAR=VALUE...] (NCCL_*, GLOO_*)."},
    {"include", 0, true, true, "With --hostfile: only these hosts (host[,host])."},
    {"exclude", 0, true, true, "With --hostfile: leave these hosts out (host[,host])."},
    {"stdin_signals", 0, false, true, "Act on signal names read from stdin; EOF acts as SIGHUP."},
    {"metrics_port", 0, true, true, "Serve Prometheus metrics on this port; 0 (default) = off."},
    {"metrics_addr", 0, true, true, "Address of the metrics endpoint (default: 127.0.0.1, loopback only)."},
    {"print_completion", 0, true, false, "Print a bash, zsh or tcsh completion script and exit."},
};

// python -m torch.distributed.launch's own options, read only under the name ddprun-launch.
constexpr OptionDef kLegacyOptions[] = {
    {"use_env", 0, false, false, "Workers read LOCAL_RANK from the environment: no --local_rank."},
    {"local_rank_arg", 0, true, false,
     "Spelling of the worker's argument: underscore (--local_rank=N, default) or dash."},
};

constexpr std::string_view kHelpName = "help";
constexpr std::string_view kVersionName = "version";
constexpr std::string_view kCompletionName = "print_completion";

// The options a command line may use: ddprun's, plus the legacy launcher's under ddprun-launch.
std::vector<const OptionDef*> options_for(bool legacy_launch) {
  std::vector<const OptionDef*> options;
  for (const OptionDef& option : kOptions) options.push_back(&option);
  if (legacy_launch) {
    for (const OptionDef& option : kLegacyOptions) options.push_back(&option);
  }
  return options;
}

const char* program_name(bool legacy_launch) {
  return legacy_launch ? "ddprun-launch" : "ddprun";
}

std::string dashed(std::string_view dest) {
  std::string name(dest);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// CLI11 name list: "-r,--redirects" or "--nproc_per_node,--nproc-per-node".
std::string cli11_names(const OptionDef& option) {
  std::string names;
  if (option.short_name != 0) names = fmt::format("-{},", option.short_name);
  names += fmt::format("--{}", option.dest);
  if (dashed(option.dest) != option.dest) names += ",--" + dashed(option.dest);
  return names;
}

const OptionDef* find_short(const std::vector<const OptionDef*>& options, char name) {
  for (const OptionDef* option : options) {
    if (option->short_name == name) return option;
  }
  return nullptr;
}

// The error for an option this mode does not know; the legacy launcher's options get a hint.
ConfigError unrecognized(std::string_view spelled, bool legacy_launch) {
  const std::string name(spelled.substr(spelled.find_first_not_of('-')));
  for (const OptionDef& option : kLegacyOptions) {
    if (!legacy_launch && (name == option.dest || name == dashed(option.dest))) {
      return ConfigError(fmt::format(
          "unrecognized option: {} (python -m torch.distributed.launch's option: run "
          "ddprun-launch, installed beside ddprun, for its command line; see ddprun --help)",
          spelled));
    }
  }
  return ConfigError(fmt::format("unrecognized option: {} (see {} --help)", spelled,
                                 program_name(legacy_launch)));
}

// argparse's rule: an exact spelling wins, else a prefix of exactly one option (either
// spelling). Returns nullptr for "--help" and its unique prefixes, which are not in the table.
const OptionDef* resolve_long(std::string_view name, bool legacy_launch) {
  if (name == kHelpName) return nullptr;
  std::vector<std::string> matches;  // underscore names of every option the prefix fits
  const OptionDef* match = nullptr;
  for (const OptionDef* option : options_for(legacy_launch)) {
    const std::string under = option->dest;
    const std::string dash = dashed(option->dest);
    if (name == under || name == dash) return option;
    if (under.starts_with(name) || dash.starts_with(name)) {
      matches.push_back(under);
      match = option;
    }
  }
  if (kHelpName.starts_with(name)) matches.emplace_back(kHelpName);
  if (matches.empty()) throw unrecognized(fmt::format("--{}", name), legacy_launch);
  if (matches.size() == 1) return matches.front() == kHelpName ? nullptr : match;
  std::string names;
  for (const std::string& candidate : matches) {
    names += fmt::format("{}--{}", names.empty() ? "" : ", ", candidate);
  }
  throw ConfigError(fmt::format("ambiguous option: --{} could match {}", name, names));
}

struct ScanResult {
  bool help = false;
  bool version = false;
  std::optional<std::string> print_completion;
  std::map<std::string, std::string> values;  // by dest; flags "1"; a repeated option: the last
  std::string training_script;
  std::vector<std::string> training_script_args;
  bool has_script = false;
};

// Walks argv up to the training script. Everything after the script is copied untouched.
ScanResult scan(int argc, const char* const* argv, bool legacy_launch) {
  ScanResult result;
  const std::vector<const OptionDef*> options = options_for(legacy_launch);
  int i = 1;
  const auto take_value = [&](const OptionDef& option, std::optional<std::string> inline_value,
                              std::string_view spelled) {
    if (!option.takes_value) {
      if (inline_value) {
        throw ConfigError(fmt::format("{}: takes no value, got '{}'", spelled, *inline_value));
      }
      result.values[option.dest] = "1";
      return;
    }
    if (!inline_value) {
      if (i + 1 >= argc) throw ConfigError(fmt::format("{}: expected a value", spelled));
      inline_value = argv[++i];
    }
    result.values[option.dest] = *inline_value;
  };
  for (; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {  // end of options: the next word is the script, even if it starts with -
      ++i;
      break;
    }
    if (arg.starts_with("--")) {
      const std::size_t eq = arg.find('=');
      const std::string_view name = arg.substr(2, eq == std::string_view::npos ? eq : eq - 2);
      std::optional<std::string> inline_value;
      if (eq != std::string_view::npos) inline_value = std::string(arg.substr(eq + 1));
      if (name == kVersionName && !inline_value) {  // exact spelling only: "--v" stays a prefix
        result.version = true;
        return result;
      }
      const OptionDef* option = resolve_long(name, legacy_launch);
      if (option == nullptr) {  // --help: argparse prints help at once, whatever follows
        result.help = true;
        return result;
      }
      take_value(*option, inline_value, arg.substr(0, eq));
      if (option->dest == kCompletionName) {  // like --help: acts at once, whatever follows
        result.print_completion = result.values[option->dest];
        return result;
      }
    } else if (arg.size() >= 2 && arg[0] == '-') {
      if (arg[1] == 'h' && arg.size() == 2) {
        result.help = true;
        return result;
      }
      const OptionDef* option = find_short(options, arg[1]);
      if (option == nullptr) throw unrecognized(arg, legacy_launch);
      std::optional<std::string> inline_value;
      if (arg.size() > 2) inline_value = std::string(arg.substr(arg[2] == '=' ? 3 : 2));
      take_value(*option, inline_value, arg.substr(0, 2));
    } else {
      break;  // the training script ("-" alone counts as a script, as in argparse)
    }
  }
  if (i < argc) {
    result.has_script = true;
    result.training_script = argv[i++];
    // torchrun 1.13 drops a "--" that directly follows the script.
    if (i < argc && std::string_view(argv[i]) == "--") ++i;
    for (; i < argc; ++i) result.training_script_args.emplace_back(argv[i]);
  }
  return result;
}

std::unique_ptr<CLI::App> make_app(bool legacy_launch) {
  auto app = legacy_launch
                 ? std::make_unique<CLI::App>(
                       "ddprun-launch: a native drop-in for python -m torch.distributed.launch.",
                       "ddprun-launch")
                 : std::make_unique<CLI::App>("ddprun: a native drop-in for torchrun.", "ddprun");
  app->footer(fmt::format(
      "Options end at training_script; everything after it goes to the workers untouched.\n"
      "Each option also reads PET_<OPTION> from the environment (e.g. PET_NPROC_PER_NODE),\n"
      "except --numa_binding, --logs_specs{}{}. Unique prefixes work: --nproc=2.\n"
      "Agents authenticate to their job's stores with --rdzv_conf token_file=PATH (else\n"
      "$DDPRUN_TOKEN_FILE), else under SLURM with munge credentials while munged runs\n"
      "($DDPRUN_MUNGE_SOCKET, else /run/munge/munge.socket.2); docs/security.md.",
      legacy_launch ? ", --use_env, --local_rank_arg" : ", --version",
      " and --print_completion"));
  app->add_option("training_script", "The script (or module with -m, command with --no_python).");
  app->add_option("training_script_args", "Its arguments.");
  app->set_help_flag("-h,--help", "Print this help and exit.");
  app->set_version_flag("--version", "ddprun", "Print the version and exit.");
  for (const OptionDef* option : options_for(legacy_launch)) {
    if (option->takes_value) {
      app->add_option(cli11_names(*option), option->help);
    } else {
      app->add_flag(cli11_names(*option), option->help);
    }
  }
  return app;
}

}  // namespace

std::string pet_variable(const std::string& dest) {
  std::string name = "PET_" + dest;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return name;
}

RawArgs read_cli_args(int argc, const char* const* argv,
                      const std::map<std::string, std::string>& env) {
  RawArgs raw;
  raw.legacy_launch = argc > 0 && is_legacy_launcher(argv[0]);
  ScanResult scanned = scan(argc, argv, raw.legacy_launch);
  raw.help = scanned.help;
  raw.version = scanned.version;
  raw.print_completion = scanned.print_completion;
  if (raw.help || raw.version || raw.print_completion) return raw;

  for (const OptionDef* option_ptr : options_for(raw.legacy_launch)) {
    const OptionDef& option = *option_ptr;
    const std::string origin = fmt::format("--{}", option.dest);
    if (const auto given = scanned.values.find(option.dest); given != scanned.values.end()) {
      raw.values[option.dest] = RawValue{given->second, ValueSource::kCli, origin};
      continue;
    }
    if (!option.has_env) continue;
    const std::string variable = pet_variable(option.dest);
    const auto it = env.find(variable);
    if (it == env.end()) continue;
    if (option.takes_value) {
      raw.values[option.dest] = RawValue{it->second, ValueSource::kEnv, variable};
      continue;
    }
    // torchrun's check_env: an integer string, non-zero means set.
    const auto number = parse_number<long long>(it->second);
    if (!number) {
      throw ConfigError(fmt::format("{} ({}): expected an integer (0 or 1), got '{}'", variable,
                                    origin, it->second));
    }
    if (*number != 0) raw.values[option.dest] = RawValue{"1", ValueSource::kEnv, variable};
  }
  if (!scanned.has_script) {
    throw ConfigError(fmt::format("training_script: missing (usage: {0} [options] script "
                                  "[args...]; see {0} --help)",
                                  program_name(raw.legacy_launch)));
  }
  raw.training_script = std::move(scanned.training_script);
  raw.training_script_args = std::move(scanned.training_script_args);
  return raw;
}

std::vector<OptionSpelling> option_spellings(bool legacy_launch) {
  std::vector<OptionSpelling> spellings;
  for (const OptionDef* option : options_for(legacy_launch)) {
    OptionSpelling spelling{.dest = option->dest, .names = {}, .takes_value = option->takes_value,
                            .help = option->help};
    if (option->short_name != 0) spelling.names.push_back(fmt::format("-{}", option->short_name));
    spelling.names.push_back(fmt::format("--{}", option->dest));
    if (dashed(option->dest) != option->dest) spelling.names.push_back("--" + dashed(option->dest));
    spellings.push_back(std::move(spelling));
  }
  spellings.push_back({.dest = "help", .names = {"-h", "--help"}, .takes_value = false,
                       .help = "Print the help and exit."});
  spellings.push_back({.dest = "version", .names = {"--version"}, .takes_value = false,
                       .help = "Print the version and exit."});
  return spellings;
}

bool is_flag_option(const std::string& dest) {
  for (const OptionDef& option : kOptions) {
    if (dest == option.dest) return !option.takes_value;
  }
  return false;
}

std::string cli_usage(bool legacy_launch) { return make_app(legacy_launch)->help(); }

bool is_legacy_launcher(const char* argv0) {
  if (argv0 == nullptr) return false;
  const std::string_view path(argv0);
  const std::size_t slash = path.rfind('/');
  return path.substr(slash == std::string_view::npos ? 0 : slash + 1) == "ddprun-launch";
}

}  // namespace ddp::agent
