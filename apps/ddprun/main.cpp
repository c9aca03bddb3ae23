// ddprun: torchrun's command line -> LaunchConfig -> ElasticAgent::run() -> exit code. Installed
// a second time as ddprun-launch, the same binary reads python -m torch.distributed.launch's.
// Exit codes: 0 success; 2 bad usage; 1 when the job could not run (rendezvous, store, spawn);
// the root-cause worker's exit code (128+N for signal N) when workers failed; 128+S for a
// handled signal S; 74 when the job succeeded but its --event_log could not be written in full.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>

#include "agent/cli/agent_options.hpp"
#include "agent/cli/completion.hpp"
#include "agent/cli/dry_run.hpp"
#include "agent/cli/entrypoint_check.hpp"
#include "agent/cli/launch_config.hpp"
#include "agent/cli/numa_binding.hpp"
#include "agent/core/agent_metrics.hpp"
#include "agent/core/event_log.hpp"
#include "agent/core/health_check_server.hpp"
#include "agent/elastic/elastic_agent.hpp"
#include "agent/elastic/file_timer_server.hpp"
#include "agent/elastic/rendezvous_factory.hpp"
#include "agent/hostfile/fanout.hpp"
#include "agent/hostfile/stdin_signals.hpp"
#include "agent/process/worker_group.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

extern char** environ;

namespace {

int report_error(const char* message, int exit_code) {
  std::fflush(stdout);
  fmt::print(stderr, "ddprun: error: {}\n", message);
  return exit_code;
}

// Runs the agent on one io_context thread until it returns; rethrows what it threw.
int run_agent(const ddp::agent::LaunchConfig& config,
              const std::map<std::string, std::string>& env) {
  boost::asio::io_context io(1);
  int exit_code = 1;
  std::exception_ptr error;
  bool events_lost = false;
  {
    const auto event_log =
        ddp::agent::make_event_sink(config.event_log ? &*config.event_log : nullptr);
    const auto metrics = ddp::agent::make_metrics_endpoint(io, ddp::agent::metrics_spec(config));
    ddp::agent::TeeEventSink events({event_log.get(), metrics ? &metrics->events() : nullptr});
    // torchrun's TORCHELASTIC_ENABLE_FILE_TIMER (it adds TORCHELASTIC_TIMER_FILE for the
    // workers) and TORCHELASTIC_HEALTH_CHECK_PORT: up before the rendezvous, down at exit.
    auto run_env = env;
    const auto file_timer = ddp::agent::make_file_timer_server(io, run_env);
    const auto health = ddp::agent::make_health_check_server(io, run_env, [&file_timer] {
      return file_timer ? file_timer->last_progress_time()
                        : std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    });
    const auto rendezvous = ddp::agent::make_rendezvous(config, io);
    ddp::agent::ProcessLauncher launcher(io, ddp::agent::forkserver_options(config));
    ddp::agent::ElasticAgent agent(io, ddp::agent::agent_spec(config, run_env), *rendezvous, events,
                                   launcher);
    // After the agent: its signal handlers must exist before a line on stdin raises a signal.
    std::optional<ddp::agent::StdinSignals> stdin_signals;
    if (config.stdin_signals) stdin_signals.emplace(io);
    boost::asio::co_spawn(io, agent.run(), [&](std::exception_ptr e, int code) {
      error = e;
      exit_code = code;
      io.stop();  // abandoned background waits end with the process
    });
    io.run();
    events_lost = event_log->has_lost_events();
  }
  if (error) std::rethrow_exception(error);
  if (exit_code == 0 && events_lost) {
    return report_error("the job succeeded but its event log is incomplete (see above)",
                        ddp::agent::kEventLogLostExitCode);
  }
  return exit_code;
}

// --hostfile: this ddprun starts the agents of every host over ssh and runs none itself.
int run_fanout(const ddp::agent::LaunchConfig& config, int argc, char** argv,
               const std::map<std::string, std::string>& env) {
  std::vector<ddp::agent::RemoteLaunch> launches;
  try {
    launches = ddp::agent::plan_hostfile_launch(config, argc, argv, env);
    if (config.dry_run) {
      ddp::agent::print_fanout_dry_run(launches, std::cout);
      return 0;
    }
  } catch (const ddp::ConfigError& e) {
    return report_error(e.what(), 2);
  }
  try {
    ddp::agent::become_child_subreaper();
    return ddp::agent::run_hostfile_launch(config, std::move(launches), env);
  } catch (const ddp::ConfigError& e) {
    return report_error(e.what(), 2);
  } catch (const std::exception& e) {
    return report_error(e.what(), 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto env = ddp::agent::environment_from(environ);
  ddp::agent::LaunchConfig config;
  try {
    config = ddp::agent::parse_launch_config(argc, argv, env);
    if (config.help) {
      std::cout << ddp::agent::usage(config.legacy_launch);
      return 0;
    }
    if (config.print_completion) {
      std::cout << ddp::agent::completion_script(*config.print_completion, config.legacy_launch);
      return 0;
    }
    if (config.version) {
      std::cout << ddp::agent::version_text(config.legacy_launch, DDP_VERSION);
      return 0;
    }
    // Quiet like torchrun (whose default is WARNING): info lines need --log_level=info.
    if (!config.log_level.empty()) {
      ddp::log::set_level(config.log_level);
    } else if (env.contains("SPDLOG_LEVEL")) {
      ddp::log::load_env_levels();
    } else {
      ddp::log::set_level("warn");
    }
    if (config.hostfile) return run_fanout(config, argc, argv, env);
    if (config.dry_run) {
      ddp::agent::print_dry_run(config, env, std::cout);
      return 0;
    }
    const auto unsupported = config.unsupported_features();
    if (!unsupported.empty()) throw ddp::ConfigError(unsupported.front());
    ddp::agent::numa_bindings_for(config, env);  // a topology that cannot serve fails here, early
    ddp::agent::check_entrypoint(config, env);   // a typo fails here, before any rendezvous
  } catch (const ddp::ConfigError& e) {
    return report_error(e.what(), 2);
  }
  ddp::agent::log_launch_config(config);
  try {
    ddp::agent::become_child_subreaper();
    return run_agent(config, env);
  } catch (const ddp::ConfigError& e) {
    return report_error(e.what(), 2);
  } catch (const std::exception& e) {
    return report_error(e.what(), 1);
  }
}
