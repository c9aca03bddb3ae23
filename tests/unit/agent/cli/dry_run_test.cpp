// --dry_run prints the config and each worker's command and variables, and starts nothing.

#include "agent/cli/dry_run.hpp"

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::parse;

TEST_CASE("dry run shows each worker's command line and environment", "[cli][dry_run]") {
  const auto config = parse({"--nproc_per_node=2", "--dry_run", "train.py", "it's", "$local_rank"});
  std::ostringstream out;
  print_dry_run(config, {}, out);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("nothing is started"));
  CHECK_THAT(text, Catch::Contains("nproc_per_node            2 (from '2') (command line)"));
  CHECK_THAT(text, Catch::Contains("slurm                     not detected"));
  CHECK_THAT(text, Catch::Contains("worker local_rank=0 rank=0\n  command: python3 -u train.py "
                                   "'it'\\''s' 0\n"));
  CHECK_THAT(text, Catch::Contains("worker local_rank=1 rank=1\n  command: python3 -u train.py "
                                   "'it'\\''s' 1\n"));
  CHECK_THAT(text, Catch::Contains("    MASTER_PORT=<free port chosen at launch>\n"));
  CHECK_THAT(text, Catch::Contains("    MASTER_ADDR=127.0.0.1\n"));
  CHECK_THAT(text, Catch::Contains("    OMP_NUM_THREADS=1\n"));
  CHECK_THAT(text, Catch::Contains("    WORLD_SIZE=2\n"));
  CHECK_THAT(text, Catch::Contains("TORCHELASTIC_ERROR_FILE=<log_dir>/none_<random>/attempt_0/1/"
                                   "error.json"));
  CHECK_THAT(text, Catch::Contains("  stdout: console\n"));
}

TEST_CASE("dry run shows every etcd member", "[cli][dry_run]") {
  const auto config = parse({"--nnodes=2", "--rdzv_backend=etcd", "--rdzv_endpoint=e1,e2:2381",
                             "--no_python", "echo"});
  std::ostringstream out;
  print_dry_run(config, {}, out);
  CHECK_THAT(out.str(), Catch::Contains("rdzv_endpoint             e1,e2:2381 (command line)"));
}

TEST_CASE("dry run shows a configured port and file routing", "[cli][dry_run]") {
  const auto config =
      parse({"--master_port=1234", "--tee=2", "--log_dir=/l", "--no_python", "echo"});
  std::ostringstream out;
  print_dry_run(config, {}, out);
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("    MASTER_PORT=1234\n"));
  CHECK_THAT(text, Catch::Contains("  command: echo\n"));
  CHECK_THAT(text,
             Catch::Contains("  stderr: console and /l/none_<random>/attempt_0/0/stderr.log"));
}

TEST_CASE("shell quoting", "[cli][dry_run]") {
  CHECK(shell_quote("plain-word_1.py") == "plain-word_1.py");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("$x") == "'$x'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
}

}  // namespace
}  // namespace ddp::agent
