// Issue 21, what a torchrun user meets first: ddprun-launch (python -m torch.distributed.launch's
// command line), --version, the --help hint, the dry-run port and the temporary log tree.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/cli/dry_run.hpp"
#include "agent/cli/log_dirs.hpp"
#include "agent/cli/worker_specs.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::parse;
using Strings = std::vector<std::string>;

LaunchConfig parse_as(const char* program, const Strings& args) {
  std::vector<const char*> argv{program};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return parse_launch_config(static_cast<int>(argv.size()), argv.data(), {});
}

TEST_CASE("ddprun-launch passes --local_rank before the script's arguments", "[cli][legacy]") {
  const auto config = parse_as("/usr/local/bin/ddprun-launch",
                               {"--nproc_per_node=2", "train.py", "--lr", "0.1"});
  CHECK(config.legacy_launch);
  CHECK(worker_argv(config, 1) == Strings{"python3", "-u", "train.py", "--local_rank=1", "--lr",
                                          "0.1"});
  SECTION("--use_env (either spelling) leaves it out") {
    for (const char* flag : {"--use_env", "--use-env"}) {
      const auto env_config = parse_as("ddprun-launch", {flag, "train.py", "--lr", "0.1"});
      CHECK(worker_argv(env_config, 0) == Strings{"python3", "-u", "train.py", "--lr", "0.1"});
    }
  }
  SECTION("--local_rank_arg=dash spells it as torch 2.x's launcher") {
    const auto dash = parse_as("ddprun-launch", {"--local_rank_arg=dash", "-m", "pkg.train"});
    CHECK(worker_argv(dash, 3) == Strings{"python3", "-u", "-m", "pkg.train", "--local-rank=3"});
  }
  SECTION("--no_python needs --use_env, as in torch's launcher") {
    CHECK_THROWS_WITH(parse_as("ddprun-launch", {"--no_python", "prog"}),
                      Catch::Contains("--no_python: needs --use_env"));
    CHECK(parse_as("ddprun-launch", {"--no_python", "--use_env", "prog"}).no_python);
  }
}

TEST_CASE("plain ddprun refuses --use_env and names ddprun-launch", "[cli][legacy]") {
  const auto config = parse({"train.py", "--use_env"});  // the script's own: untouched
  CHECK_FALSE(config.legacy_launch);
  CHECK(worker_argv(config, 0) == Strings{"python3", "-u", "train.py", "--use_env"});
  CHECK_THROWS_WITH(parse({"--use_env", "train.py"}), Catch::Contains("run ddprun-launch"));
  CHECK_THROWS_WITH(parse({"--local_rank_arg=dash", "train.py"}),
                    Catch::Contains("run ddprun-launch"));
}

TEST_CASE("the version flag prints the version; an unknown option points at --help", "[cli]") {
  CHECK(parse({"--version"}).version);
  CHECK(parse({"--version", "train.py"}).version);
  CHECK_FALSE(parse({"train.py", "--version"}).version);  // the script's
  CHECK_THAT(version_text(false, "1.2.3"), Catch::StartsWith("ddprun 1.2.3"));
  CHECK_THAT(version_text(true, "1.2.3"), Catch::StartsWith("ddprun-launch 1.2.3"));
  CHECK_THROWS_WITH(parse({"--bogus", "s"}), Catch::EndsWith("(see ddprun --help)"));
  CHECK_THROWS_WITH(parse({"-x", "s"}), Catch::EndsWith("(see ddprun --help)"));
  CHECK_THROWS_WITH(parse_as("ddprun-launch", {"--bogus", "s"}),
                    Catch::EndsWith("(see ddprun-launch --help)"));
  CHECK_THROWS_WITH(parse({"--nproc_per_node=2"}), Catch::Contains("see ddprun --help"));
  CHECK_THAT(usage(true), Catch::Contains("--use_env"));
  CHECK_THAT(usage(false), !Catch::Contains("--use_env"));
}

TEST_CASE("numa_binding takes torchrun 2.8's values, core_complex too", "[cli]") {
  CHECK(parse({"--numa_binding=core_complex", "s"}).numa_binding == "core-complex");
  CHECK(parse({"--numa-binding", "exclusive", "s"}).numa_binding == "exclusive");
  CHECK_THROWS_WITH(parse({"--numa_binding=l3", "s"}), Catch::Contains("invalid choice 'l3'"));
}

TEST_CASE("dry run of a static --rdzv_endpoint=H:P shows port P", "[cli][dry_run]") {
  const auto config = parse({"--rdzv_endpoint=127.0.0.2:29611", "--dry_run", "train.py"});
  std::ostringstream out;
  print_dry_run(config, {}, out);
  CHECK_THAT(out.str(), Catch::Contains("    MASTER_PORT=29611\n"));
  CHECK_THAT(out.str(), Catch::Contains("    MASTER_ADDR=127.0.0.2\n"));
  CHECK_THAT(out.str(), Catch::Contains("master_port               29611 (from --rdzv_endpoint)"));
  CHECK_THAT(out.str(), !Catch::Contains("<free port chosen at launch>"));
}

TEST_CASE("a temporary log tree is removed at exit unless a file was written", "[cli][logs]") {
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("ddprun_first_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::map<std::string, std::string> env{{"TMPDIR", tmp.string()}};
  const auto prepare = [&] {
    const std::string run_dir = create_run_log_dir(std::nullopt, "none", env);
    prepare_attempt_log_dir(attempt_log_dir(run_dir, 0), 2);
    return run_dir;
  };
  SECTION("empty: removed") {
    const std::string run_dir = prepare();
    {
      const TemporaryLogDir owner(std::nullopt, run_dir);
      CHECK(owner.kept_dir().empty());
    }
    CHECK(fs::is_empty(tmp));
  }
  SECTION("an error file: kept and named") {
    const std::string run_dir = prepare();
    {
      const TemporaryLogDir owner(std::nullopt, run_dir);
      std::ofstream(attempt_log_dir(run_dir, 0) + "/1/error.json") << "{}";
      CHECK(owner.kept_dir() == run_dir);
    }
    CHECK(fs::exists(attempt_log_dir(run_dir, 0) + "/1/error.json"));
  }
  SECTION("--log_dir: never removed") {
    const std::string run_dir = create_run_log_dir((tmp / "mine").string(), "none", {});
    { const TemporaryLogDir owner((tmp / "mine").string(), run_dir); }
    CHECK(fs::is_directory(run_dir));
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace ddp::agent
