// Worker command lines, templating, the worker environment and the log tree.

#include "agent/cli/worker_specs.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "agent/cli/log_dirs.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::Env;
using test::parse;
using Strings = std::vector<std::string>;

rdzv::RendezvousInfo round_info(int group_rank, int nodes, int nproc) {
  rdzv::RendezvousInfo info;
  info.run_id = "job";
  info.group_rank = group_rank;
  info.group_world_size = nodes;
  info.rank_base = group_rank * nproc;
  info.world_size = nodes * nproc;
  info.restart_count = 1;
  info.master_addr = "10.0.0.1";
  info.master_port = 29501;
  return info;
}

std::map<std::string, std::string> env_map(const Strings& env) {
  std::map<std::string, std::string> map;
  for (const std::string& entry : env) {
    const auto eq = entry.find('=');
    map[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return map;
}

TEST_CASE("worker argv per entry-point mode", "[cli][worker]") {
  CHECK(worker_argv(parse({"train.py", "--lr", "0.1"}), 0) ==
        Strings{"python3", "-u", "train.py", "--lr", "0.1"});
  CHECK(worker_argv(parse({"-m", "pkg.mod", "a"}, {{"PYTHON_EXEC", "/py"}}), 0) ==
        Strings{"/py", "-u", "-m", "pkg.mod", "a"});
  CHECK(worker_argv(parse({"--no_python", "echo", "hi"}), 0) == Strings{"echo", "hi"});
  const Strings run_path = worker_argv(parse({"--run_path", "--python=/py", "s.py", "x"}), 0);
  REQUIRE(run_path.size() == 6);
  CHECK(run_path[0] == "/py");
  CHECK(run_path[2] == "-c");
  CHECK_THAT(run_path[3], Catch::Contains("runpy.run_path(sys.argv[0], run_name='__main__')"));
  CHECK(Strings(run_path.begin() + 4, run_path.end()) == Strings{"s.py", "x"});
}

TEST_CASE("arguments are templated with the local rank as torchrun does", "[cli][worker]") {
  CHECK(substitute_local_rank("a$$b $local_rank ${local_rank} $other ${x} $", 0) ==
        "a$b 0 0 $other ${x} $");
  CHECK(substitute_local_rank("--out=/tmp/r$local_rank.log", 3) == "--out=/tmp/r3.log");
  CHECK(substitute_local_rank("$local_rank_x ${local_rank ${local_rank}}", 2) ==
        "$local_rank_x ${local_rank 2}");
  CHECK(substitute_local_rank("$LOCAL_RANK", 1) == "$LOCAL_RANK");
  CHECK(substitute_local_rank("plain", 1) == "plain");
  SECTION("the program itself is not templated") {
    const Strings argv = worker_argv(parse({"--no_python", "./x$local_rank", "$local_rank"}), 5);
    CHECK(argv == Strings{"./x$local_rank", "5"});
  }
}

TEST_CASE("one-node environment has torchrun's variables over the parent's", "[cli][worker]") {
  const auto config = parse({"--nproc_per_node=2", "--max_restarts=3", "s.py"});
  const Env parent = {{"PATH", "/usr/bin"}, {"FOO", "parent"}, {"RANK", "stale"}};
  const auto specs = make_worker_specs(config, round_info(0, 1, 2), parent, "/logs/attempt_1");
  REQUIRE(specs.size() == 2);
  const auto env = env_map(specs[1].env);
  const std::map<std::string, std::string> expected = {
      {"FOO", "parent"},
      {"PATH", "/usr/bin"},
      {"GROUP_RANK", "0"},
      {"GROUP_WORLD_SIZE", "1"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29501"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"OMP_NUM_THREADS", "1"},
      {"RANK", "1"},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", "1"},
      {"ROLE_WORLD_SIZE", "2"},
      {"WORLD_SIZE", "2"},
      {"TORCHELASTIC_ERROR_FILE", "/logs/attempt_1/1/error.json"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_RUN_ID", "job"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"},
      {"DDPRUN_PROGRESS_FILE", "/logs/attempt_1/1/progress"},
      {"DDPRUN_STACK_DIR", "/logs/attempt_1/1"},
      {"DDPRUN_STACK_SIGNAL", std::to_string(SIGRTMIN + 6)},
      {"PYTHONPATH", "/logs/python"},
  };
  CHECK(env == expected);
  CHECK(std::is_sorted(specs[1].env.begin(), specs[1].env.end()));
  CHECK(specs[1].ddprun_env.count("FOO") == 0);
  CHECK(specs[1].ddprun_env.at("RANK") == "1");
  CHECK(specs[1].stdout_path == "/logs/attempt_1/1/stdout.log");
  CHECK(specs[1].stderr_path == "/logs/attempt_1/1/stderr.log");
  CHECK(specs[1].error_file == "/logs/attempt_1/1/error.json");
}

TEST_CASE("two-node ranks are contiguous per node", "[cli][worker]") {
  const auto config = parse({"--nnodes=2", "--node_rank=1", "--nproc_per_node=3", "s.py"});
  const auto specs = make_worker_specs(config, round_info(1, 2, 3), {}, "/a");
  REQUIRE(specs.size() == 3);
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    const auto& set = specs[local_rank].ddprun_env;
    CHECK(set.at("LOCAL_RANK") == std::to_string(local_rank));
    CHECK(set.at("RANK") == std::to_string(3 + local_rank));
    CHECK(set.at("ROLE_RANK") == std::to_string(3 + local_rank));
    CHECK(set.at("GROUP_RANK") == "1");
    CHECK(set.at("GROUP_WORLD_SIZE") == "2");
    CHECK(set.at("WORLD_SIZE") == "6");
    CHECK(set.at("ROLE_WORLD_SIZE") == "6");
    CHECK(set.at("LOCAL_WORLD_SIZE") == "3");
  }
}

TEST_CASE("inherited values win where torchrun keeps them", "[cli][worker]") {
  const auto config = parse({"--nproc_per_node=2", "s.py"});
  const Env parent = {{"OMP_NUM_THREADS", "4"},
                      {"NCCL_ASYNC_ERROR_HANDLING", "0"},
                      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}};
  CHECK_FALSE(sets_omp_num_threads(config, parent));
  const auto env = env_map(make_worker_specs(config, round_info(0, 1, 2), parent, "/a")[0].env);
  CHECK(env.at("OMP_NUM_THREADS") == "4");
  CHECK(env.at("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  SECTION("one worker gets no OMP_NUM_THREADS") {
    const auto single = parse({"s.py"});
    CHECK_FALSE(sets_omp_num_threads(single, {}));
    CHECK(make_worker_specs(single, round_info(0, 1, 1), {}, "/a")[0].ddprun_env.count(
              "OMP_NUM_THREADS") == 0);
  }
}

TEST_CASE("virtual local rank maps each worker to one device", "[cli][worker]") {
  const auto config = parse({"--virtual_local_rank", "--nproc_per_node=2", "s.py"});
  const auto bare = make_worker_specs(config, round_info(0, 1, 2), {}, "/a");
  CHECK(bare[1].ddprun_env.at("LOCAL_RANK") == "0");
  CHECK(bare[1].ddprun_env.at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(bare[1].ddprun_env.at("RANK") == "1");
  const auto listed =
      make_worker_specs(config, round_info(0, 1, 2), {{"CUDA_VISIBLE_DEVICES", "5,7"}}, "/a");
  CHECK(listed[0].ddprun_env.at("CUDA_VISIBLE_DEVICES") == "5");
  CHECK(listed[1].ddprun_env.at("CUDA_VISIBLE_DEVICES") == "7");
}

TEST_CASE("redirect, tee and console filter per local rank", "[cli][worker]") {
  const auto config = parse(
      {"--nproc_per_node=3", "--redirects=0:2,2:1", "--tee=1:3", "--local_ranks_filter=1", "s.py"});
  const auto specs = make_worker_specs(config, round_info(0, 1, 3), {}, "/a");
  CHECK(specs[0].redirect_mask == kStdErr);
  CHECK(specs[0].tee_mask == kStdNone);
  CHECK(specs[1].redirect_mask == kStdBoth);  // tee implies redirect
  CHECK(specs[1].tee_mask == kStdBoth);
  CHECK(specs[2].redirect_mask == kStdOut);
  CHECK_FALSE(specs[0].console_visible);
  CHECK(specs[1].console_visible);
  CHECK_FALSE(specs[2].console_visible);
}

TEST_CASE("worker args are templated per local rank", "[cli][worker]") {
  const auto config = parse({"--nproc_per_node=2", "s.py", "--rank=$local_rank"});
  const auto specs = make_worker_specs(config, round_info(0, 1, 2), {}, "/a");
  CHECK(specs[0].argv.back() == "--rank=0");
  CHECK(specs[1].argv.back() == "--rank=1");
}

TEST_CASE("the log tree is <base>/<run_id>_<random>/attempt_<n>/<local_rank>", "[cli][logs]") {
  namespace fs = std::filesystem;
  const fs::path base =
      fs::temp_directory_path() / ("ddprun_cli_logs_" + std::to_string(::getpid()));
  const std::string run_dir = create_run_log_dir(base.string(), "a/b", {});
  CHECK(fs::path(run_dir).parent_path() == base);
  CHECK_THAT(fs::path(run_dir).filename().string(), Catch::StartsWith("a_b_"));
  CHECK(create_run_log_dir(base.string(), "a/b", {}) != run_dir);
  const std::string attempt = attempt_log_dir(run_dir, 2);
  CHECK(attempt == run_dir + "/attempt_2");
  CHECK(attempt_log_dir(run_dir, 2, 1) == run_dir + "/attempt_2.1");  // a further start
  CHECK(worker_log_dir(attempt, 1) == attempt + "/1");
  prepare_attempt_log_dir(attempt, 2);
  std::ofstream(attempt + "/1/stale.log") << "old";
  prepare_attempt_log_dir(attempt, 2);
  CHECK(fs::is_directory(attempt + "/0"));
  CHECK(fs::is_directory(attempt + "/1"));
  CHECK_FALSE(fs::exists(attempt + "/1/stale.log"));
  SECTION("without --log_dir the base is a fresh ddprun_ dir under TMPDIR") {
    const std::string temp_run = create_run_log_dir(std::nullopt, "none", {{"TMPDIR", base}});
    CHECK_THAT(fs::path(temp_run).parent_path().filename().string(), Catch::StartsWith("ddprun_"));
    CHECK(fs::path(temp_run).parent_path().parent_path() == base);
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace ddp::agent
