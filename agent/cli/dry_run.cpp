// --dry_run output. It reuses make_worker_specs with the round a static launch would close
// first, so what it prints is what the agent would exec, not a second description of it.

#include "agent/cli/dry_run.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "agent/cli/worker_specs.hpp"
#include "agent/core/signal_names.hpp"

namespace ddp::agent {
namespace {

constexpr const char* kFreePort = "<free port chosen at launch>";

std::string describe(const LaunchConfig& config, const std::string& dest,
                     const std::string& value) {
  return fmt::format("{} ({})", value, to_string(config.source_of(dest)));
}

std::string stream_route(int redirect_mask, int tee_mask, int bit, const std::string& path) {
  if ((tee_mask & bit) != 0) return "console and " + path;
  if ((redirect_mask & bit) != 0) return path;
  return "console";
}

void print_config(const LaunchConfig& config, std::ostream& out) {
  const auto line = [&](const char* name, const std::string& value) {
    out << fmt::format("  {:<26}{}\n", name, value);
  };
  const auto dest_line = [&](const char* dest, const std::string& value) {
    line(dest, describe(config, dest, value));
  };
  out << "ddprun dry run: nothing is started\nconfig:\n";
  line("entrypoint", entrypoint_name(config));
  dest_line("nnodes", fmt::format("{}:{}", config.nnodes_min, config.nnodes_max));
  dest_line("nproc_per_node",
            fmt::format("{} (from '{}')", config.nproc_per_node, config.nproc_per_node_raw));
  dest_line("rdzv_backend", config.rdzv_backend);
  // etcd takes a list of members; the parsed endpoint is only the first of them.
  dest_line("rdzv_endpoint",
            config.rdzv_backend.starts_with("etcd") && !config.rdzv_endpoint_raw.empty()
                ? config.rdzv_endpoint_raw
                : to_string(config.rdzv_endpoint));
  dest_line("rdzv_id", config.rdzv_id);
  line("rdzv_conf", config.rdzv_conf.to_string());
  dest_line("standalone", config.standalone ? "yes" : "no");
  dest_line("node_rank", std::to_string(config.node_rank));
  dest_line("master_addr", config.master_addr);
  if (!config.master_port && config.rdzv_backend == "static" && config.rdzv_endpoint.port) {
    line("master_port", fmt::format("{} (from --rdzv_endpoint)", *config.rdzv_endpoint.port));
  } else {
    dest_line("master_port", config.master_port ? std::to_string(*config.master_port) : kFreePort);
  }
  if (config.numa_binding) dest_line("numa_binding", *config.numa_binding);
  dest_line("max_restarts", std::to_string(config.max_restarts));
  dest_line("role", config.role);
  dest_line("python", config.python);
  dest_line("log_dir", config.log_dir.value_or("<new temporary directory>"));
  dest_line("redirects", to_string(config.redirects));
  dest_line("tee", to_string(config.tee));
  std::string signals;
  for (int number : config.signals_to_handle) {
    signals += fmt::format("{}{}", signals.empty() ? "" : ",", signal_name(number));
  }
  dest_line("signals_to_handle", signals);
  dest_line("shutdown_timeout", fmt::format("{}s", config.shutdown_timeout.count() / 1000.0));
  if (config.no_slurm) {
    line("slurm", "ignored (--no_slurm)");
  } else {
    line("slurm", config.slurm ? config.slurm->summary : "not detected");
  }
  if (config.no_mpi) {
    line("mpirun", "ignored (--no_mpi)");
  } else if (config.mpi) {
    line("mpirun", config.mpi->summary);
  }
  for (const std::string& message : config.unsupported_features()) {
    line("unsupported", message);
  }
}

}  // namespace

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_@%+=:,./-") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

void print_dry_run(const LaunchConfig& config, const std::map<std::string, std::string>& parent_env,
                   std::ostream& out) {
  print_config(config, out);
  // The first round of a homogeneous static launch; c10d may order nodes differently.
  rdzv::RendezvousInfo info;
  info.run_id = config.rdzv_id;
  info.group_rank = config.rdzv_backend == "static" ? config.node_rank : 0;
  info.group_world_size = config.nnodes_max;
  info.rank_base = info.group_rank * config.nproc_per_node;
  info.world_size = config.nnodes_max * config.nproc_per_node;
  // Static: the store's endpoint, which --rdzv_endpoint=H:P sets over master_addr:master_port
  // (as the run itself uses it: rendezvous_factory.cpp).
  const bool is_static = config.rdzv_backend == "static";
  info.master_addr = is_static ? config.rdzv_endpoint.host : "<rank-0 node's address>";
  const bool port_known = is_static && config.rdzv_endpoint.port.has_value();
  info.master_port = port_known ? static_cast<std::uint16_t>(*config.rdzv_endpoint.port) : 0;
  const std::filesystem::path run_dir =
      std::filesystem::path(config.log_dir.value_or("<log_dir>")) / (config.rdzv_id + "_<random>");
  const std::string attempt_dir = attempt_log_dir(run_dir.string(), 0);

  out << fmt::format("workers (first round: group_rank={} of {} node(s), {} worker(s) per node):\n",
                     info.group_rank, info.group_world_size, config.nproc_per_node);
  auto specs = make_worker_specs(config, info, parent_env, attempt_dir);
  apply_numa_bindings(numa_bindings_for(config, parent_env), specs);
  for (const WorkerSpec& spec : specs) {
    out << fmt::format("worker local_rank={} rank={}\n  command:", spec.local_rank, spec.rank);
    for (const std::string& word : spec.argv) out << ' ' << shell_quote(word);
    out << "\n  environment set by ddprun (everything else is inherited):\n";
    for (const auto& [key, value] : spec.ddprun_env) {
      const std::string shown = key == "MASTER_PORT" && !port_known ? kFreePort : value;
      out << fmt::format("    {}={}\n", key, shown);
    }
    out << fmt::format("  stdout: {}\n",
                       stream_route(spec.redirect_mask, spec.tee_mask, kStdOut, spec.stdout_path));
    out << fmt::format("  stderr: {}\n",
                       stream_route(spec.redirect_mask, spec.tee_mask, kStdErr, spec.stderr_path));
    if (!spec.console_visible) out << "  console: hidden by --local_ranks_filter\n";
    if (!spec.numa.cpus.empty()) {
      out << fmt::format("  cpus: {} (memory from NUMA node {})\n", to_cpu_list(spec.numa.cpus),
                         spec.numa.memory_node);
    }
  }
}

}  // namespace ddp::agent
