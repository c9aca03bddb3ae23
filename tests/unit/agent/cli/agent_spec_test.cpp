// agent_spec(): what the elastic agent's loop runs, read off the LaunchConfig (cli/agent_options).

#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <utility>

#include "agent/cli/agent_options.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using test::Env;
using test::parse;

TEST_CASE("the agent's spec carries the flags its loop reads", "[cli][agent_spec]") {
  const Env env{{"PATH", "/usr/bin:/bin"}};
  const LaunchConfig config =
      parse({"--nproc_per_node=2", "--max_restarts=3", "--recovery=inprocess",
             "--rdzv_conf=reform_timeout=7", "--hang_timeout=5", "--label", "--rdzv_id=job7",
             "--log_dir=/tmp/x", "--signals_to_handle=SIGUSR1", "--no_python", "/bin/true"},
            env);
  const AgentSpec spec = agent_spec(config, env);
  CHECK(spec.nproc_per_node == 2);
  CHECK(spec.max_restarts == 3);
  CHECK(spec.inprocess_recovery);
  CHECK(spec.reform_timeout == 7s);
  CHECK(spec.hang_timeout == 5s);
  CHECK(spec.label);
  CHECK(spec.run_id == "job7");
  CHECK(spec.log_dir == std::optional<std::string>("/tmp/x"));
  CHECK(spec.signals_to_handle == std::vector<int>{SIGUSR1});
  CHECK(spec.shutdown_timeout == config.shutdown_timeout);
  CHECK(spec.parent_env == env);
  CHECK(spec.entrypoint == entrypoint_name(config));
  CHECK(spec.interpreter.empty());  // --no_python: no interpreter to name in a report
  CHECK(spec.omp_num_threads_banner == omp_num_threads_banner());  // 2 workers, no OMP_NUM_THREADS
  CHECK_FALSE(agent_spec(parse({"--no_python", "/bin/true"}, env), env).inprocess_recovery);
}

TEST_CASE("stack requests go through the c10d store unless its port is the system's",
          "[cli][agent_spec]") {
  const auto c10d = parse({"--nnodes=1:2", "--rdzv_backend=c10d", "--rdzv_endpoint=10.0.0.9:29555",
                           "--no_python", "/bin/true"});
  CHECK(agent_spec(c10d, {}).rendezvous_store ==
        std::make_optional(std::make_pair(std::string("10.0.0.9"), std::uint16_t{29555})));
  CHECK_FALSE(agent_spec(parse({"--standalone", "--no_python", "/bin/true"}), {})
                  .rendezvous_store.has_value());
  CHECK_FALSE(agent_spec(parse({"--nnodes=2", "--node_rank=1", "--master_addr=10.0.0.9",
                                "--no_python", "/bin/true"}),
                         {})
                  .rendezvous_store.has_value());  // static: the round's store
}

TEST_CASE("the worker plan gives each local rank its place in the round", "[cli][agent_spec]") {
  const AgentSpec spec = agent_spec(parse({"--nproc_per_node=2", "--no_python", "/bin/true"}), {});
  rdzv::RendezvousInfo info;
  info.rank_base = 4;
  info.world_size = 6;
  info.group_rank = 2;
  info.group_world_size = 3;
  const auto specs = spec.workers->specs(info, "/tmp/attempt_0");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].rank == 4);
  CHECK(specs[1].rank == 5);
  CHECK(specs[1].local_rank == 1);
  CHECK(specs[1].argv.front() == "/bin/true");
}

TEST_CASE("a Python job's report names the interpreter and how it was chosen",
          "[cli][agent_spec]") {
  const Env env{{"PATH", "/usr/bin:/bin"}};
  const AgentSpec spec = agent_spec(parse({"train.py"}, env), env);
  CHECK(spec.interpreter_choice == "python3 on PATH");
  CHECK(spec.interpreter.find("python3") != std::string::npos);
}

}  // namespace
}  // namespace ddp::agent
