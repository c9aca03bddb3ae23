// Issue 33: --print_completion / --print-completion (torchrun 2.x) prints a completion script for
// bash, zsh or tcsh from the option table, and acts at once like --help.

#include "agent/cli/completion.hpp"

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::parse;

TEST_CASE("print_completion is read at once in both spellings, without PET_",
          "[cli][completion]") {
  CHECK(parse({"--print_completion", "bash"}).print_completion == "bash");
  CHECK(parse({"--print-completion=zsh", "--bogus-after-it"}).print_completion == "zsh");
  CHECK(parse({"--nproc_per_node=2", "--print-completion", "tcsh"}).print_completion == "tcsh");
  CHECK_FALSE(parse({"s.py"}, {{"PET_PRINT_COMPLETION", "bash"}}).print_completion);
  CHECK_FALSE(parse({"s.py", "--print_completion", "bash"}).print_completion);  // the script's
  CHECK_THROWS_WITH(parse({"--print_completion"}), "--print_completion: expected a value");
}

TEST_CASE("completion scripts list both spellings and the fixed choices", "[cli][completion]") {
  const std::string bash = completion_script("bash", false);
  CHECK_THAT(bash, Catch::Contains("complete -o default -F _ddprun ddprun"));
  CHECK_THAT(bash, Catch::Contains("--nproc_per_node --nproc-per-node"));
  CHECK_THAT(bash, Catch::Contains("\"static c10d etcd etcd-v2 etcd-v3\""));
  CHECK_THAT(bash, !Catch::Contains("--use_env"));
  CHECK_THAT(completion_script("bash", true), Catch::Contains("--use_env"));
  const std::string zsh = completion_script("zsh", false);
  CHECK_THAT(zsh, Catch::StartsWith("#compdef ddprun"));
  CHECK_THAT(zsh, Catch::Contains("'--rdzv_backend=["));
  CHECK_THAT(zsh, Catch::Contains(":rdzv_backend:(static c10d etcd etcd-v2 etcd-v3)'"));
  const std::string tcsh = completion_script("tcsh", false);
  CHECK_THAT(tcsh, Catch::Contains("complete ddprun 'c/--/("));
  CHECK_THAT(tcsh, Catch::Contains(" nproc-per-node "));
  CHECK_THAT(tcsh, Catch::Contains("'n/--log_level/(trace debug info warn error critical off)/'"));
  CHECK_THROWS_WITH(completion_script("fish", false),
                    "--print_completion: invalid choice 'fish' (choose from bash, zsh, tcsh)");
}

}  // namespace
}  // namespace ddp::agent
