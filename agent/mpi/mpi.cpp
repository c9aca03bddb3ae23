// detect_mpi: OpenMPI's per-task variables. Why mpirun's host stands for task 0's host across
// hosts: the tasks learn nothing about each other's hosts from the environment, but every task
// has mpirun's contact URI, and mpirun places task 0 on the first host of its list, which is
// mpirun's own host in the usual `mpirun -H this,other` or hostfile launch. Task 0 verifies it
// (is_on_mpirun_host) and fails with the fix when that does not hold.

#include "agent/mpi/mpi.hpp"

#include <fmt/format.h>

#include <functional>
#include <string_view>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr int kPortBase = 20000;  // as SLURM's derived port: below the ephemeral range
constexpr int kPortSpan = 10000;

const std::string* lookup(const std::map<std::string, std::string>& env, const char* key) {
  const auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int to_int(const std::map<std::string, std::string>& env, const char* key, int minimum) {
  const std::string* text = lookup(env, key);
  const auto value = text == nullptr ? std::nullopt : parse_number<int>(*text);
  if (!value || *value < minimum) {
    throw ConfigError(fmt::format("{}='{}': expected an integer >= {} (set by mpirun)", key,
                                  text == nullptr ? "" : *text, minimum));
  }
  return *value;
}

// The first IPv4 address of "jobid.vpid;tcp://a,b:port;tcp6://[..]:port" that is not loopback.
std::string hnp_address(std::string_view uri) {
  const std::size_t tcp = uri.find("tcp://");
  if (tcp == std::string_view::npos) return "";
  std::string_view rest = uri.substr(tcp + 6);
  rest = rest.substr(0, rest.find(';'));
  rest = rest.substr(0, rest.rfind(':'));  // the port
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view address = rest.substr(0, comma);
    if (!address.empty() && !address.starts_with("127.")) return std::string(address);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return "";
}

}  // namespace

std::optional<MpiDefaults> detect_mpi(const std::map<std::string, std::string>& env) {
  if (lookup(env, "OMPI_COMM_WORLD_SIZE") == nullptr ||
      lookup(env, "OMPI_COMM_WORLD_RANK") == nullptr) {
    return std::nullopt;
  }
  MpiDefaults out;
  out.nnodes = to_int(env, "OMPI_COMM_WORLD_SIZE", 1);
  out.node_rank = to_int(env, "OMPI_COMM_WORLD_RANK", 0);
  if (out.node_rank >= out.nnodes) {
    throw ConfigError(fmt::format("OMPI_COMM_WORLD_RANK={} is not below OMPI_COMM_WORLD_SIZE={}",
                                  out.node_rank, out.nnodes));
  }
  const std::string* local_size = lookup(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
  const bool one_host = local_size != nullptr && parse_number<int>(*local_size) == out.nnodes;
  if (one_host) {
    out.master_addr = "127.0.0.1";
  } else if (const std::string* uri = lookup(env, "OMPI_MCA_orte_hnp_uri")) {
    out.master_addr = hnp_address(*uri);
  }
  std::string job;
  if (const std::string* id = lookup(env, "OMPI_MCA_ess_base_jobid")) {
    job = *id;
  } else if (const std::string* ns = lookup(env, "PMIX_NAMESPACE")) {
    job = *ns;
  }
  if (!job.empty()) {
    out.run_id = "mpi-" + job;
    const auto numeric = parse_number<unsigned long long>(job);
    const std::size_t hash =
        numeric ? static_cast<std::size_t>(*numeric) : std::hash<std::string>{}(job);
    out.master_port = kPortBase + static_cast<int>(hash % kPortSpan);
  }
  out.summary = fmt::format(
      "mpirun task {} of {} ({}): nnodes={} node_rank={} master_addr={} master_port={} "
      "run_id={}",
      out.node_rank, out.nnodes, one_host ? "one host" : "several hosts", out.nnodes, out.node_rank,
      out.master_addr.empty() ? "(not known: give --master_addr)" : out.master_addr,
      out.master_port, out.run_id.empty() ? "(none)" : out.run_id);
  return out;
}

bool is_on_mpirun_host(const std::map<std::string, std::string>& env) {
  const std::string* hnp = lookup(env, "OMPI_MCA_orte_hnp_uri");
  const std::string* local = lookup(env, "OMPI_MCA_orte_local_daemon_uri");
  return hnp != nullptr && local != nullptr && *hnp == *local;
}

}  // namespace ddp::agent
