// `ddprun --hostfile`: plan (hostfile -> selected hosts -> per-host commands) and run (the
// supervisor on its own io_context). The stop deadline leaves the hosts' agents their whole
// --shutdown_timeout before ssh connections are cut.

#include "agent/hostfile/fanout.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <random>

#include "agent/cli/cli_args.hpp"
#include "agent/hostfile/fanout_supervisor.hpp"
#include "agent/hostfile/hostfile.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr std::chrono::seconds kStopMargin{15};

std::string fresh_run_id() {
  std::random_device device;
  return fmt::format("hostfile-{:08x}{:08x}", device(), device());
}

}  // namespace

std::vector<RemoteLaunch> plan_hostfile_launch(const LaunchConfig& config, int argc,
                                               const char* const* argv,
                                               const std::map<std::string, std::string>& env) {
  const std::string origin =
      config.source_of("hostfile") == ValueSource::kEnv ? "PET_HOSTFILE" : "--hostfile";
  const auto hosts = select_hosts(read_hostfile(*config.hostfile, origin), config.include_hosts,
                                  config.exclude_hosts);
  const RawArgs raw = read_cli_args(argc, argv, env);
  FanoutContext context;
  std::error_code ec;
  context.cwd = std::filesystem::current_path(ec).string();
  if (ec) throw ConfigError(fmt::format("--hostfile: no working directory: {}", ec.message()));
  context.ddprun_path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) context.ddprun_path = argc > 0 ? argv[0] : "ddprun";
  context.run_id = fresh_run_id();
  return plan_fanout(config, raw, hosts, env, context);
}

int run_hostfile_launch(const LaunchConfig& config, std::vector<RemoteLaunch> launches,
                        const std::map<std::string, std::string>& env) {
  std::vector<std::string> entries;
  entries.reserve(env.size());
  for (const auto& [key, value] : env) entries.push_back(key + "=" + value);
  FanoutOptions options;
  options.stop_deadline = config.shutdown_timeout + kStopMargin;
  boost::asio::io_context io(1);
  FanoutSupervisor supervisor(io, std::move(launches), std::move(entries), options);
  return supervisor.run();
}

}  // namespace ddp::agent
