#pragma once
// The --hostfile fan-out's plan: for each selected host, the local command (ssh ... host
// 'cd DIR && exec env VARS ddprun FLAGS script args') that starts that host's agent with its node
// rank, its worker count and the first host as the rendezvous endpoint. Pure: no process starts.

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "agent/cli/cli_args.hpp"
#include "agent/cli/launch_config.hpp"
#include "agent/hostfile/hostfile.hpp"

namespace ddp::agent {

// One host's launch.
struct RemoteLaunch {
  std::string host;               // as in the hostfile (ssh's destination, may be user@host)
  std::string address;            // host without "user@": labels, master_addr, rdzv_endpoint
  int node_rank = 0;              // file order among the selected hosts
  int nproc_per_node = 1;         // --nproc_per_node if given, else the host's slots, else 1
  std::string remote_command;     // the shell line the host runs
  std::vector<std::string> argv;  // the local command: ssh words, host, remote_command
};

// What the plan takes from this machine.
struct FanoutContext {
  std::string cwd;          // the working directory the hosts cd into
  std::string ddprun_path;  // this ddprun's path (the default of --remote_ddprun)
  std::string run_id;       // the c10d run id when --rdzv_id was not given (fresh per launch)
};

// Plans one launch per host of `hosts`, in order. `raw` is this ddprun's command line as read by
// read_cli_args (its flags go to every host, except the fan-out's own and those set per host);
// `env` is this ddprun's environment (NCCL_*, GLOO_* and --export variables come from it). Throws
// ConfigError naming the flag for --node_rank, --local_addr or --standalone (per-host or
// single-node options), a static --nnodes other than the host count, a bad --ssh command, or an
// --export variable that is not set here.
std::vector<RemoteLaunch> plan_fanout(const LaunchConfig& config, const RawArgs& raw,
                                      const std::vector<HostEntry>& hosts,
                                      const std::map<std::string, std::string>& env,
                                      const FanoutContext& context);

// Splits a command the way a POSIX shell splits words: blanks separate, '...' and "..." quote,
// a backslash escapes the next character. Throws ConfigError naming `origin` on an unclosed quote
// or an empty command.
std::vector<std::string> split_command_words(const std::string& text, const std::string& origin);

// --dry_run with --hostfile: each host's node rank, worker count and shell-quoted command.
void print_fanout_dry_run(const std::vector<RemoteLaunch>& launches, std::ostream& out);

}  // namespace ddp::agent
