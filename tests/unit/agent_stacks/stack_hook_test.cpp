// The workers' environment for stacks and hang detection.
#include <catch2/catch.hpp>

#include <csignal>

#include "agent/stack_hook.hpp"
#include "agent/worker_spec.hpp"
#include "common/progress_record.hpp"

using namespace ddp::agent;

TEST_CASE("the stack hook's directory goes first on PYTHONPATH, before the user's", "[stacks]") {
  std::map<std::string, std::string> set;
  add_stack_hook_env(set, {{"PYTHONPATH", "/user/lib:/more"}}, "/run", "/run/attempt_0/1");
  CHECK(set.at("PYTHONPATH") == "/run/python:/user/lib:/more");
  CHECK(set.at(kStackDirEnv) == "/run/attempt_0/1");
  CHECK(set.at(kStackSignalEnv) == std::to_string(SIGRTMIN + 6));
  set.clear();
  add_stack_hook_env(set, {}, "/run", "/d");
  CHECK(set.at("PYTHONPATH") == "/run/python");
}

TEST_CASE("every worker gets its stack directory and progress file", "[stacks]") {
  LaunchConfig config;
  config.nproc_per_node = 2;
  config.training_script = "train.py";
  ddp::rdzv::RendezvousInfo info;
  info.world_size = 2;
  const auto specs = make_worker_specs(config, info, {}, "/logs/run_x/attempt_3");
  REQUIRE(specs.size() == 2);
  CHECK(specs[1].ddprun_env.at(ddp::kProgressFileEnv) == "/logs/run_x/attempt_3/1/progress");
  CHECK(specs[1].ddprun_env.at(kStackDirEnv) == "/logs/run_x/attempt_3/1");
  CHECK(specs[1].ddprun_env.at("PYTHONPATH") == "/logs/run_x/python");
  CHECK(python_stack_file("/d", 42) == "/d/python-42.txt");
}
