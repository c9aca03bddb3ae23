// The workers' environment for stacks and hang detection.
#include <catch2/catch.hpp>

#include <csignal>

#include "agent/cli/launch_config.hpp"
#include "agent/cli/worker_specs.hpp"
#include "agent/stacks/stack_hook.hpp"
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

TEST_CASE("the hang timeout is off by default and read from its flag or PET_HANG_TIMEOUT",
          "[hang][cli]") {
  const auto parse = [](std::vector<const char*> argv,
                        std::map<std::string, std::string> env) {
    argv.insert(argv.begin(), "ddprun");
    argv.push_back("train.py");
    return parse_launch_config(static_cast<int>(argv.size()), argv.data(), env,
                               [](const auto&) { return std::nullopt; });
  };
  CHECK(parse({}, {}).hang_timeout.count() == 0);
  CHECK(parse({"--hang_timeout=2.5"}, {}).hang_timeout.count() == 2500);
  CHECK(parse({"--hang-timeout", "30"}, {}).hang_timeout.count() == 30000);
  CHECK(parse({}, {{"PET_HANG_TIMEOUT", "7"}}).hang_timeout.count() == 7000);
  CHECK(parse({"--hang_timeout=1"}, {{"PET_HANG_TIMEOUT", "7"}}).hang_timeout.count() == 1000);
  CHECK_THROWS_WITH(parse({"--hang_timeout=-1"}, {}),
                    Catch::Contains("--hang_timeout: expected a number of seconds >= 0"));
  CHECK_THROWS_WITH(parse({}, {{"PET_HANG_TIMEOUT", "soon"}}),
                    Catch::Contains("PET_HANG_TIMEOUT"));
}
