// Planning the --hostfile fan-out. The hosts' agents are plain static (or c10d) agents: the plan
// only writes the flags a user would have typed on each node (node rank, worker count, first
// host as the endpoint), so everything after the launch behaves as a hand-started job does.

#include "agent/hostfile/fanout_plan.hpp"

#include <fmt/format.h>

#include <set>

#include "agent/cli/dry_run.hpp"
#include "agent/core/text.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

// Variables the hosts get by default: the collectives' tuning knobs.
constexpr std::string_view kDefaultExportPrefixes[] = {"NCCL_", "GLOO_"};

// The fan-out's own options and those the plan sets per host: never copied as given.
const std::set<std::string> kNotForwarded = {
    "hostfile", "ssh",      "remote_ddprun", "export",         "include", "exclude",
    "dry_run",  "nnodes",   "node_rank",     "nproc_per_node", "rdzv_id", "stdin_signals",
    "label",    "no_slurm", "master_addr",   "rdzv_endpoint"};

bool is_identifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// NCCL_*/GLOO_* from `env`, then --export (VAR takes its value here, VAR=VALUE as given).
std::map<std::string, std::string> exported_variables(
    const LaunchConfig& config, const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> vars;
  for (const auto& [key, value] : env) {
    for (const std::string_view prefix : kDefaultExportPrefixes) {
      if (key.starts_with(prefix)) vars[key] = value;
    }
  }
  if (config.export_vars.empty()) return vars;
  for (std::string_view item : detail::split_commas(config.export_vars)) {
    item = detail::strip(item);
    const std::size_t eq = item.find('=');
    const std::string name(item.substr(0, eq));
    if (!is_identifier(name)) {
      throw ConfigError(fmt::format("--export: '{}' is not a variable name", item));
    }
    if (eq != std::string_view::npos) {
      vars[name] = std::string(item.substr(eq + 1));
      continue;
    }
    const auto it = env.find(name);
    if (it == env.end()) {
      throw ConfigError(fmt::format(
          "--export: {} is not set here (give {}=VALUE to set it on the hosts)", name, name));
    }
    vars[name] = it->second;
  }
  return vars;
}

void reject_per_host_options(const LaunchConfig& config, int host_count) {
  for (const char* dest : {"node_rank", "local_addr"}) {
    if (config.source_of(dest) == ValueSource::kCli ||
        config.source_of(dest) == ValueSource::kEnv) {
      throw ConfigError(
          fmt::format("--{}: differs from host to host; --hostfile sets it for each host", dest));
    }
  }
  if (config.standalone) throw ConfigError("--standalone: cannot be combined with --hostfile");
  const ValueSource nnodes = config.source_of("nnodes");
  if (config.rdzv_backend == "static" && nnodes != ValueSource::kDefault &&
      (config.nnodes_min != host_count || config.nnodes_max != host_count)) {
    throw ConfigError(
        fmt::format("--nnodes={}: the hostfile selects {} host(s)", config.nnodes_raw, host_count));
  }
}

// The flags every host gets as this ddprun got them (from the command line or PET_*).
std::vector<std::string> forwarded_flags(const RawArgs& raw) {
  std::vector<std::string> flags;
  for (const auto& [dest, value] : raw.values) {
    if (kNotForwarded.contains(dest)) continue;
    flags.push_back(is_flag_option(dest) ? fmt::format("--{}", dest)
                                         : fmt::format("--{}={}", dest, value.text));
  }
  return flags;
}

std::string address_of(const std::string& host) {
  const std::size_t at = host.rfind('@');
  return at == std::string::npos ? host : host.substr(at + 1);
}

std::string endpoint_host(const std::string& address) {
  return address.find(':') == std::string::npos ? address : fmt::format("[{}]", address);
}

std::string join_quoted(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) {
    if (!line.empty()) line += ' ';
    line += shell_quote(word);
  }
  return line;
}

}  // namespace

std::vector<std::string> split_command_words(const std::string& text, const std::string& origin) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else if (c == '\'' || c == '"') {
      const std::size_t close = text.find(c, i + 1);
      if (close == std::string::npos) {
        throw ConfigError(fmt::format("{}: unclosed {} in '{}'", origin, c, text));
      }
      word += text.substr(i + 1, close - i - 1);
      i = close;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw ConfigError(fmt::format("{}: expected a command", origin));
  return words;
}

std::vector<RemoteLaunch> plan_fanout(const LaunchConfig& config, const RawArgs& raw,
                                      const std::vector<HostEntry>& hosts,
                                      const std::map<std::string, std::string>& env,
                                      const FanoutContext& context) {
  const int count = static_cast<int>(hosts.size());
  reject_per_host_options(config, count);
  const std::vector<std::string> ssh = split_command_words(config.ssh, "--ssh");
  const auto vars = exported_variables(config, env);
  const std::vector<std::string> flags = forwarded_flags(raw);
  const std::string first = address_of(hosts.front().host);
  const bool is_static = config.rdzv_backend == "static";
  const auto given = [&](const char* dest) {
    const ValueSource source = config.source_of(dest);
    return source == ValueSource::kCli || source == ValueSource::kEnv;
  };

  std::vector<RemoteLaunch> launches;
  for (int i = 0; i < count; ++i) {
    const HostEntry& entry = hosts[static_cast<std::size_t>(i)];
    RemoteLaunch launch;
    launch.host = entry.host;
    launch.address = address_of(entry.host);
    launch.node_rank = i;
    launch.nproc_per_node =
        given("nproc_per_node") ? config.nproc_per_node : entry.slots.value_or(1);

    std::vector<std::string> words = {"env", fmt::format("DDPRUN_NODE_NAME={}", launch.address)};
    for (const auto& [key, value] : vars) words.push_back(fmt::format("{}={}", key, value));
    words.push_back(config.remote_ddprun.value_or(context.ddprun_path));
    words.insert(words.end(), {"--stdin_signals", "--label", "--no_slurm"});
    words.insert(words.end(), flags.begin(), flags.end());
    words.push_back(given("nnodes") ? fmt::format("--nnodes={}", config.nnodes_raw)
                                    : fmt::format("--nnodes={}", count));
    if (given("nproc_per_node")) {
      words.push_back(fmt::format("--nproc_per_node={}", config.nproc_per_node_raw));
    } else {
      words.push_back(fmt::format("--nproc_per_node={}", launch.nproc_per_node));
    }
    // Under c10d and etcd, --node_rank orders the members (c10d's store host, the first host, stays
    // first).
    words.push_back(fmt::format("--node_rank={}", i));
    if (is_static) {
      words.push_back(
          fmt::format("--master_addr={}", given("master_addr") ? config.master_addr : first));
      if (given("rdzv_endpoint")) {
        words.push_back(fmt::format("--rdzv_endpoint={}", config.rdzv_endpoint_raw));
      }
    } else {
      words.push_back(fmt::format("--rdzv_endpoint={}", given("rdzv_endpoint")
                                                            ? config.rdzv_endpoint_raw
                                                            : endpoint_host(first)));
    }
    if (given("rdzv_id")) {
      words.push_back(fmt::format("--rdzv_id={}", config.rdzv_id));
    } else if (!is_static) {
      words.push_back(fmt::format("--rdzv_id={}", context.run_id));
    }
    // "--" ends the options, so a script named "-x" stays the script; a "--" right after the
    // script would be dropped (torchrun's rule), so one that was kept here is doubled.
    words.push_back("--");
    words.push_back(raw.training_script);
    if (!raw.training_script_args.empty() && raw.training_script_args.front() == "--") {
      words.push_back("--");
    }
    words.insert(words.end(), raw.training_script_args.begin(), raw.training_script_args.end());

    launch.remote_command =
        fmt::format("cd {} && exec {}", shell_quote(context.cwd), join_quoted(words));
    launch.argv = ssh;
    launch.argv.push_back(entry.host);
    launch.argv.push_back(launch.remote_command);
    launches.push_back(std::move(launch));
  }
  return launches;
}

void print_fanout_dry_run(const std::vector<RemoteLaunch>& launches, std::ostream& out) {
  out << "ddprun --hostfile: " << launches.size() << " host(s); nothing is started\n";
  for (const RemoteLaunch& launch : launches) {
    out << "\n# host " << launch.host << ": node_rank=" << launch.node_rank
        << " nproc_per_node=" << launch.nproc_per_node << "\n"
        << join_quoted(launch.argv) << "\n";
  }
}

}  // namespace ddp::agent
