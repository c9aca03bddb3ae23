// parse_launch_config: raw option text (cli_args.cpp) -> a validated LaunchConfig. Order
// matters: --standalone rewrites the rendezvous options before they are parsed; SLURM fills only
// what neither the command line nor PET_* gave; derived defaults (ports, run id, endpoint) come
// last because they depend on the node count and backend.

#include "agent/cli/launch_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <csignal>

#include "agent/cli/cli_args.hpp"
#include "agent/cli/endpoint.hpp"
#include "agent/cli/nproc.hpp"
#include "agent/cli/program_search.hpp"
#include "agent/cli/run_id_hash.hpp"
#include "agent/cli/uuid4.hpp"
#include "agent/core/signal_names.hpp"
#include "agent/core/text.hpp"
#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr int kDefaultMasterPort = 29500;  // torchrun / TCPStore default
constexpr int kC10dDefaultPort = 29400;
constexpr int kEtcdDefaultPort = 2379;
constexpr double kDefaultShutdownSeconds = 30.0;
constexpr std::array kBackends = {"static", "c10d", "etcd", "etcd-v2", "etcd-v3"};
constexpr std::array kStartMethods = {"spawn", "fork", "forkserver"};
constexpr std::array kRecoveryModes = {"restart", "inprocess"};
constexpr std::array kNumaBindings = {"node", "socket", "exclusive", "core-complex",
                                     "core_complex"};
constexpr std::array kLocalRankArgs = {"underscore", "dash"};
constexpr std::array kLogLevels = {"trace",   "debug", "info",     "warn",
                                   "warning", "error", "critical", "off"};

template <typename Choices>
void require_choice(const RawValue& raw, const Choices& choices) {
  std::string list;
  for (const char* choice : choices) {
    if (raw.text == choice) return;
    list += fmt::format("{}{}", list.empty() ? "" : ", ", choice);
  }
  throw ConfigError(
      fmt::format("{}: invalid choice '{}' (choose from {})", raw.origin, raw.text, list));
}

// --preload: module names separated by commas (dotted identifiers); "" preloads nothing.
std::vector<std::string> parse_preload(const RawValue& raw) {
  std::vector<std::string> modules;
  if (raw.text.empty()) return modules;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = std::min(raw.text.find(',', begin), raw.text.size());
    std::string name = raw.text.substr(begin, comma - begin);
    bool valid = !name.empty() && name.front() != '.' && name.back() != '.' &&
                 std::isdigit(static_cast<unsigned char>(name.front())) == 0;
    for (char c : name) {
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.');
    }
    if (!valid) {
      throw ConfigError(fmt::format("{}: '{}' is not a module name", raw.origin, name));
    }
    modules.push_back(std::move(name));
    if (comma == raw.text.size()) return modules;
    begin = comma + 1;
  }
}

int to_int(const RawValue& raw, int minimum, int maximum) {
  const std::optional<int> value = parse_number<int>(raw.text);
  if (!value) {
    throw ConfigError(fmt::format("{}: expected an integer, got '{}'", raw.origin, raw.text));
  }
  if (*value < minimum || *value > maximum) {
    throw ConfigError(
        fmt::format("{}: must be between {} and {}, got {}", raw.origin, minimum, maximum, *value));
  }
  return *value;
}

// Seconds as an int or a float ("0.5"); zero only where allowed.
std::chrono::milliseconds to_duration(const std::string& text, const std::string& origin,
                                      bool allow_zero) {
  const std::optional<double> parsed = parse_number<double>(text);
  const double seconds = parsed.value_or(-1);
  if (!parsed || !std::isfinite(seconds) || seconds < 0 || (!allow_zero && seconds == 0)) {
    throw ConfigError(fmt::format("{}: expected a number of seconds {} 0, got '{}'", origin,
                                  allow_zero ? ">=" : ">", text));
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

void parse_nnodes(const std::string& text, const std::string& origin, LaunchConfig& config) {
  const auto bad = [&] {
    return ConfigError(
        fmt::format("{}: expected N or MIN:MAX with 0 < MIN <= MAX, got '{}'", origin, text));
  };
  const std::size_t colon = text.find(':');
  const auto number = [&](std::string_view part) {
    const std::optional<int> value = parse_number<int>(part);
    if (!value) throw bad();
    return *value;
  };
  const std::string_view view = text;
  if (colon == std::string::npos) {
    config.nnodes_min = config.nnodes_max = number(view);
  } else {
    if (view.find(':', colon + 1) != std::string_view::npos) throw bad();
    config.nnodes_min = number(view.substr(0, colon));
    config.nnodes_max = number(view.substr(colon + 1));
  }
  if (config.nnodes_min <= 0 || config.nnodes_min > config.nnodes_max) throw bad();
  config.nnodes_raw = text;
}

// torchrun's duplicate filters: comma-separated, ",," is a literal comma.
std::vector<std::string> split_filters(const std::string& text) {
  std::vector<std::string> filters;
  std::string current;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';
      ++i;
    } else {
      filters.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) filters.push_back(std::move(current));
  std::erase(filters, std::string());
  return filters;
}

// Holds the raw values and records each field's source as it is read.
class Reader {
 public:
  Reader(RawArgs& raw, LaunchConfig& config) : raw_(raw), config_(config) {}

  const RawValue* get(const std::string& dest) {
    const auto it = raw_.values.find(dest);
    if (it == raw_.values.end()) {
      config_.sources.emplace(dest, ValueSource::kDefault);
      return nullptr;
    }
    config_.sources[dest] = it->second.source;
    return &it->second;
  }
  bool flag(const std::string& dest) { return get(dest) != nullptr; }
  void set_source(const std::string& dest, ValueSource source) { config_.sources[dest] = source; }

 private:
  RawArgs& raw_;
  LaunchConfig& config_;
};

void read_rendezvous(Reader& reader, LaunchConfig& config) {
  if (const RawValue* v = reader.get("rdzv_backend")) {
    require_choice(*v, kBackends);
    config.rdzv_backend = v->text;
  }
  if (const RawValue* v = reader.get("rdzv_endpoint")) config.rdzv_endpoint_raw = v->text;
  std::optional<std::string> given_id;
  if (const RawValue* v = reader.get("rdzv_id")) given_id = v->text;
  config.standalone = reader.flag("standalone");
  if (config.standalone) {
    // As newest torchrun: c10d on a free local port and a fresh id, whatever else was given.
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint_raw = "localhost:0";
    given_id = make_uuid4();
    for (const char* dest : {"rdzv_backend", "rdzv_endpoint", "rdzv_id"}) {
      reader.set_source(dest, ValueSource::kDerived);
    }
  }
  if (given_id) config.rdzv_id = *given_id;
  if (const RawValue* v = reader.get("node_rank")) config.node_rank = to_int(*v, 0, 1 << 20);
  if (const RawValue* v = reader.get("master_addr")) config.master_addr = v->text;
  if (const RawValue* v = reader.get("master_port")) config.master_port = to_int(*v, 0, kMaxPort);
  if (const RawValue* v = reader.get("local_addr")) config.local_addr = v->text;
  if (const RawValue* v = reader.get("rdzv_conf")) {
    config.rdzv_conf = RdzvConf::parse(v->text, v->origin);
  } else {
    config.rdzv_conf = RdzvConf::parse("", "--rdzv_conf");
  }
}

// Fills what the user left unset from an srun task's (or an mpirun task's) environment.
void apply_scheduler(const SlurmDefaults& slurm, ValueSource source, LaunchConfig& config) {
  const auto unset = [&](const char* dest) {
    return config.source_of(dest) == ValueSource::kDefault;
  };
  if (unset("nnodes")) {
    config.nnodes_min = config.nnodes_max = slurm.nnodes;
    config.nnodes_raw = std::to_string(slurm.nnodes);
    config.sources["nnodes"] = source;
  }
  if (unset("node_rank")) {
    config.node_rank = slurm.node_rank;
    config.sources["node_rank"] = source;
  }
  if (unset("master_addr") && !slurm.master_addr.empty()) {
    config.master_addr = slurm.master_addr;
    config.sources["master_addr"] = source;
  }
  if (unset("master_port") && slurm.master_port > 0) {
    config.master_port = slurm.master_port;
    config.sources["master_port"] = source;
  }
  if (unset("rdzv_id") && !slurm.run_id.empty()) {
    config.rdzv_id = slurm.run_id;
    config.sources["rdzv_id"] = source;
  }
  if (config.rdzv_backend != "static" && unset("rdzv_endpoint") && config.master_port) {
    config.rdzv_endpoint_raw = fmt::format("{}:{}", config.master_addr, *config.master_port);
    config.sources["rdzv_endpoint"] = source;
  }
}

// Across hosts, the master address mpirun detection gives is mpirun's host: task 0 must run
// there. It checks, and fails with the fix (mpirun then stops the other tasks).
void check_mpi_master(const std::map<std::string, std::string>& env, const LaunchConfig& config) {
  const ValueSource source = config.source_of("master_addr");
  if (source != ValueSource::kDefault && source != ValueSource::kMpi) return;  // given: trusted
  if (config.mpi->master_addr.empty()) {
    throw ConfigError(
        "mpirun across hosts: the launcher does not say where task 0 runs; give "
        "--master_addr=<task 0's host> to every task");
  }
  if (config.mpi->master_addr == "127.0.0.1" || config.node_rank != 0) return;
  if (!is_on_mpirun_host(env)) {
    throw ConfigError(fmt::format(
        "mpirun: task 0 does not run on mpirun's host ({}), which the other tasks take for the "
        "master address; give --master_addr=<task 0's host> to every task, or run mpirun on "
        "the first host of its list",
        config.mpi->master_addr));
  }
}

// How an error names an option whose value may have come from elsewhere than the command line.
std::string origin_of(const LaunchConfig& config, const std::string& dest) {
  switch (config.source_of(dest)) {
    case ValueSource::kEnv:
      return pet_variable(dest);
    case ValueSource::kSlurm:
      return fmt::format("--{} (from SLURM)", dest);
    case ValueSource::kMpi:
      return fmt::format("--{} (from mpirun)", dest);
    default:
      return "--" + dest;
  }
}

// Defaults that depend on the node count and backend, then cross-option checks.
void resolve_rendezvous(LaunchConfig& config) {
  if (!config.master_port && !config.is_single_node()) {
    config.master_port = kDefaultMasterPort;
    config.sources["master_port"] = ValueSource::kDerived;
  }
  const std::string origin = origin_of(config, "rdzv_endpoint");
  if (config.rdzv_backend == "static") {
    if (config.rdzv_endpoint_raw.empty()) {
      config.rdzv_endpoint = Endpoint{config.master_addr, config.master_port};
    } else {
      config.rdzv_endpoint = parse_endpoint(config.rdzv_endpoint_raw, std::nullopt, origin);
      if (!config.rdzv_endpoint.port) {
        throw ConfigError(fmt::format("{}: port is missing in endpoint '{}' (static backend)",
                                      origin, config.rdzv_endpoint_raw));
      }
    }
    if (config.node_rank >= config.nnodes_max) {
      throw ConfigError(fmt::format(
          "{}: {} is out of range for {}={} (0..{})", origin_of(config, "node_rank"),
          config.node_rank, origin_of(config, "nnodes"), config.nnodes_raw, config.nnodes_max - 1));
    }
    config.rdzv_conf.set("rank", std::to_string(config.node_rank));
  } else {
    const int default_port = config.rdzv_backend == "c10d" ? kC10dDefaultPort : kEtcdDefaultPort;
    // etcd takes a list of members (h1:2379,h2:2379): the first one stands for the endpoint here,
    // and the backend reads them all from rdzv_endpoint_raw.
    const std::string_view first_member = std::string_view(config.rdzv_endpoint_raw)
                                              .substr(0, config.rdzv_endpoint_raw.find(','));
    config.rdzv_endpoint = parse_endpoint(first_member, default_port, origin);
    // A fresh id per single-node job, so two jobs on one machine never join one rendezvous.
    // Several nodes must agree on the id: derive_job_run_id() gives them one from the command.
    if (config.source_of("rdzv_id") == ValueSource::kDefault && config.is_single_node()) {
      config.rdzv_id = make_uuid4();
      config.sources["rdzv_id"] = ValueSource::kDerived;
    }
  }
}

// Multi-node c10d or etcd without --rdzv_id: every node runs the same command, so an id hashed from
// it (run_id_hash.hpp) is shared by the nodes of one job and differs between two jobs that meet at
// one endpoint.
void derive_job_run_id(LaunchConfig& config) {
  if (config.rdzv_backend == "static" || config.is_single_node() ||
      config.source_of("rdzv_id") != ValueSource::kDefault) {
    return;
  }
  config.rdzv_id = run_id_hash(config);
  config.sources["rdzv_id"] = ValueSource::kDerived;
}

// torchrun runs every entry under Python. ddprun runs a .py entry under Python, and an
// executable program that is not a .py file as given, as --no_python would: so
// `ddprun build/bin/ddp-train` just works. A non-executable file still goes to Python.
void infer_no_python(LaunchConfig& config, const std::map<std::string, std::string>& env) {
  if (config.no_python || config.module || config.run_path || config.training_script.empty() ||
      config.training_script.ends_with(".py")) {
    return;
  }
  if (is_executable_program(config.training_script, env)) {
    config.no_python = true;
    config.sources["no_python"] = ValueSource::kDerived;
  }
}

void read_entrypoint(Reader& reader, LaunchConfig& config,
                     const std::map<std::string, std::string>& env) {
  config.module = reader.flag("module");
  config.no_python = reader.flag("no_python");
  config.run_path = reader.flag("run_path");
  if (config.module && config.no_python && !config.run_path) {
    throw ConfigError("--no_python: cannot be combined with -m/--module");
  }
  config.use_env = reader.flag("use_env");
  if (const RawValue* v = reader.get("local_rank_arg")) {
    require_choice(*v, kLocalRankArgs);
    config.local_rank_dash = v->text == "dash";
  }
  if (config.legacy_launch && config.no_python && !config.use_env) {  // as torch's launcher
    throw ConfigError("--no_python: needs --use_env (a program run directly gets no --local_rank)");
  }
  if (const RawValue* v = reader.get("python")) {
    if (v->text.empty()) throw ConfigError(fmt::format("{}: expected a program", v->origin));
    config.python = v->text;
  } else if (const auto it = env.find("PYTHON_EXEC"); it != env.end() && !it->second.empty()) {
    config.python = it->second;
    config.sources["python"] = ValueSource::kEnv;
  }
}

void read_logging(Reader& reader, LaunchConfig& config,
                  const std::map<std::string, std::string>& env) {
  // An empty --log_dir means "none given", as torchrun tests it for truth.
  if (const RawValue* v = reader.get("log_dir"); v && !v->text.empty()) config.log_dir = v->text;
  if (const RawValue* v = reader.get("redirects")) {
    config.redirects = parse_std_streams(v->text, v->origin);
  }
  if (const RawValue* v = reader.get("tee")) config.tee = parse_std_streams(v->text, v->origin);
  if (const RawValue* v = reader.get("local_ranks_filter")) {
    config.local_ranks_filter = parse_local_ranks_filter(v->text, v->origin);
  }
  if (const RawValue* v = reader.get("log_line_prefix_template")) {
    config.log_line_prefix_template = v->text;
  } else if (const auto it = env.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); it != env.end()) {
    config.log_line_prefix_template = it->second;
    config.sources["log_line_prefix_template"] = ValueSource::kEnv;
  }
  if (const RawValue* v = reader.get("duplicate_stdout_filters")) {
    config.duplicate_stdout_filters = split_filters(v->text);
  }
  if (const RawValue* v = reader.get("duplicate_stderr_filters")) {
    config.duplicate_stderr_filters = split_filters(v->text);
  }
  if (const RawValue* v = reader.get("event_log_handler")) config.event_log_handler = v->text;
  if (const RawValue* v = reader.get("logs_specs")) config.logs_specs = v->text;
  if (const RawValue* v = reader.get("event_log")) {
    if (v->text.empty()) throw ConfigError(fmt::format("{}: expected a file path", v->origin));
    config.event_log = v->text;
  }
  config.label = reader.flag("label");
  if (const RawValue* v = reader.get("log_level")) {
    require_choice(*v, kLogLevels);
    config.log_level = v->text == "warning" ? "warn" : v->text;
  }
  if (const RawValue* v = reader.get("metrics_port")) config.metrics_port = to_int(*v, 0, 65535);
  if (const RawValue* v = reader.get("metrics_addr")) config.metrics_addr = v->text;
}

void read_supervision(Reader& reader, LaunchConfig& config,
                      const std::map<std::string, std::string>& env) {
  if (const RawValue* v = reader.get("max_restarts")) {
    config.max_restarts = to_int(*v, 0, 1 << 30);
  }
  if (const RawValue* v = reader.get("monitor_interval")) {
    config.monitor_interval = to_duration(v->text, v->origin, /*allow_zero=*/false);
  }
  if (const RawValue* v = reader.get("start_method")) {
    require_choice(*v, kStartMethods);
    config.start_method = v->text;
  }
  if (const RawValue* v = reader.get("preload")) config.preload = parse_preload(*v);
  config.preload_fallback = reader.flag("preload_fallback");
  if (const RawValue* v = reader.get("role")) {
    if (v->text.empty()) throw ConfigError(fmt::format("{}: must not be empty", v->origin));
    config.role = v->text;
  }
  if (const RawValue* v = reader.get("signals_to_handle")) config.signals_to_handle_raw = v->text;
  config.signals_to_handle =
      parse_signal_list(config.signals_to_handle_raw, origin_of(config, "signals_to_handle"));
  if (const RawValue* v = reader.get("shutdown_timeout")) {
    config.shutdown_timeout = to_duration(v->text, v->origin, /*allow_zero=*/true);
  } else if (const auto it = env.find("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); it != env.end()) {
    config.shutdown_timeout =
        to_duration(it->second, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", /*allow_zero=*/true);
    config.sources["shutdown_timeout"] = ValueSource::kEnv;
  } else {
    config.shutdown_timeout =
        std::chrono::milliseconds(std::llround(kDefaultShutdownSeconds * 1000));
  }
  if (const RawValue* v = reader.get("hang_timeout")) {
    config.hang_timeout = to_duration(v->text, v->origin, /*allow_zero=*/true);
  }
  if (const RawValue* v = reader.get("recovery")) {
    require_choice(*v, kRecoveryModes);
    config.recovery = v->text;
  }
  config.virtual_local_rank = reader.flag("virtual_local_rank");
  if (const RawValue* v = reader.get("numa_binding")) {
    require_choice(*v, kNumaBindings);
    config.numa_binding = v->text == "core_complex" ? "core-complex" : v->text;
  }
}

// --hostfile and its companions; the fan-out (agent/hostfile/fanout_plan.cpp) checks them against
// the rendezvous options.
void read_fanout(Reader& reader, LaunchConfig& config) {
  if (const RawValue* v = reader.get("hostfile"); v && !v->text.empty()) config.hostfile = v->text;
  if (const RawValue* v = reader.get("ssh")) {
    if (detail::strip(v->text).empty()) {
      throw ConfigError(fmt::format("{}: expected a command", v->origin));
    }
    config.ssh = v->text;
  }
  if (const RawValue* v = reader.get("remote_ddprun")) {
    if (v->text.empty()) throw ConfigError(fmt::format("{}: expected a path", v->origin));
    config.remote_ddprun = v->text;
  }
  if (const RawValue* v = reader.get("export")) config.export_vars = v->text;
  if (const RawValue* v = reader.get("include")) config.include_hosts = v->text;
  if (const RawValue* v = reader.get("exclude")) config.exclude_hosts = v->text;
  config.stdin_signals = reader.flag("stdin_signals");
  if (!config.hostfile) {
    for (const char* dest : {"ssh", "remote_ddprun", "export", "include", "exclude"}) {
      if (config.source_of(dest) != ValueSource::kDefault) {
        throw ConfigError(fmt::format("--{}: only applies with --hostfile", dest));
      }
    }
  }
}

}  // namespace

const char* to_string(ValueSource source) {
  switch (source) {
    case ValueSource::kDefault:
      return "default";
    case ValueSource::kCli:
      return "command line";
    case ValueSource::kEnv:
      return "environment";
    case ValueSource::kSlurm:
      return "SLURM";
    case ValueSource::kDerived:
      return "derived";
    case ValueSource::kMpi:
      return "mpirun";
  }
  return "unknown";
}

ValueSource LaunchConfig::source_of(const std::string& dest) const {
  const auto it = sources.find(dest);
  return it == sources.end() ? ValueSource::kDefault : it->second;
}

std::vector<std::string> LaunchConfig::unsupported_features() const {
  std::vector<std::string> messages;
  if (log_dir == "/dev/null") {
    messages.push_back("--log_dir=/dev/null (no log files, torchrun 2.x) is not supported yet");
  }
  if (logs_specs) messages.push_back("--logs_specs is not supported (no plug-ins in ddprun)");
  if (event_log_handler != "null") {
    messages.push_back(fmt::format("--event_log_handler={} is not supported (use --event_log FILE)",
                                   event_log_handler));
  }
  return messages;
}

LaunchConfig parse_launch_config(int argc, const char* const* argv,
                                 const std::map<std::string, std::string>& env) {
  return parse_launch_config(argc, argv, env, detect_slurm);
}

LaunchConfig parse_launch_config(int argc, const char* const* argv,
                                 const std::map<std::string, std::string>& env,
                                 const SlurmDetector& detect) {
  RawArgs raw = read_cli_args(argc, argv, env);
  LaunchConfig config;
  config.legacy_launch = raw.legacy_launch;
  if (raw.help || raw.version || raw.print_completion) {
    config.help = raw.help;
    config.version = raw.version;
    config.print_completion = raw.print_completion;
    return config;
  }
  Reader reader(raw, config);
  if (const RawValue* v = reader.get("nnodes")) parse_nnodes(v->text, v->origin, config);
  if (const RawValue* v = reader.get("nproc_per_node")) {
    config.nproc_per_node_raw = v->text;
    config.nproc_per_node = resolve_nproc_per_node(v->text, v->origin, env);
  }
  read_rendezvous(reader, config);
  read_fanout(reader, config);
  config.no_slurm = reader.flag("no_slurm");
  config.no_mpi = reader.flag("no_mpi");
  // With --hostfile this ddprun only launches: the hosts' agents get their ranks from the file.
  // mpirun first: inside a SLURM allocation its tasks also carry the SLURM step of its daemons.
  if (!config.no_mpi && !config.standalone && !config.hostfile) {
    config.mpi = detect_mpi(env);
    if (config.mpi) {
      apply_scheduler(*config.mpi, ValueSource::kMpi, config);
      check_mpi_master(env, config);
    }
  }
  if (!config.mpi && !config.no_slurm && !config.standalone && !config.hostfile) {
    config.slurm = detect(env);
    if (config.slurm) apply_scheduler(*config.slurm, ValueSource::kSlurm, config);
  }
  resolve_rendezvous(config);
  read_supervision(reader, config, env);
  read_entrypoint(reader, config, env);
  read_logging(reader, config, env);
  config.dry_run = reader.flag("dry_run");
  config.training_script = std::move(raw.training_script);
  config.training_script_args = std::move(raw.training_script_args);
  infer_no_python(config, env);
  derive_job_run_id(config);
  return config;
}

std::string usage(bool legacy_launch) { return cli_usage(legacy_launch); }

std::string version_text(bool legacy_launch, const char* version) {
  return fmt::format("{} {} (torchrun-compatible launcher{})\n",
                     legacy_launch ? "ddprun-launch" : "ddprun", version,
                     legacy_launch ? "; python -m torch.distributed.launch's command line" : "");
}

std::map<std::string, std::string> environment_from(const char* const* envp) {
  std::map<std::string, std::string> env;
  for (; envp != nullptr && *envp != nullptr; ++envp) {
    const std::string_view entry(*envp);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

void log_launch_config(const LaunchConfig& config) {
  const auto logger = ddp::log::get("agent");
  if (config.slurm) logger->info("slurm detected: {}", config.slurm->summary);
  if (config.mpi) logger->info("mpirun detected: {}", config.mpi->summary);
  logger->info(
      "launch config entrypoint={} nnodes={}:{} nproc_per_node={} rdzv_backend={} "
      "rdzv_endpoint={} run_id={} max_restarts={}{}",
      entrypoint_name(config), config.nnodes_min, config.nnodes_max, config.nproc_per_node,
      config.rdzv_backend, to_string(config.rdzv_endpoint), config.rdzv_id, config.max_restarts,
      config.no_python ? "" : fmt::format(" python={}", config.python));
  if (config.rdzv_backend != "static" && !config.is_single_node() &&
      config.source_of("rdzv_id") == ValueSource::kDerived) {
    logger->info(
        "run id {} is derived from the command line, the same on every node that runs "
        "it; give --rdzv_id if the nodes' commands differ",
        config.rdzv_id);
  }
}

std::string entrypoint_name(const LaunchConfig& config) {
  if (config.run_path) return "run_script_path";
  return config.training_script;
}

}  // namespace ddp::agent
