// Command-line shape: spellings, abbreviations, PET_* fallbacks, and what goes to the worker.

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <functional>

#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::Env;
using test::parse;
using Strings = std::vector<std::string>;

TEST_CASE("every multi-word option accepts both spellings", "[cli]") {
  struct Case {
    std::string under, value;
    std::function<void(const LaunchConfig&)> check;
  };
  const std::vector<Case> cases = {
      {"nproc_per_node", "3", [](auto& c) { CHECK(c.nproc_per_node == 3); }},
      {"rdzv_backend", "c10d", [](auto& c) { CHECK(c.rdzv_backend == "c10d"); }},
      {"rdzv_endpoint", "h:1234", [](auto& c) { CHECK(c.rdzv_endpoint.port == 1234); }},
      {"rdzv_id", "job7", [](auto& c) { CHECK(c.rdzv_id == "job7"); }},
      {"rdzv_conf", "join_timeout=9",
       [](auto& c) { CHECK(c.rdzv_conf.join_timeout() == std::chrono::seconds(9)); }},
      {"max_restarts", "4", [](auto& c) { CHECK(c.max_restarts == 4); }},
      {"monitor_interval", "0.5",
       [](auto& c) { CHECK(c.monitor_interval == std::chrono::milliseconds(500)); }},
      {"start_method", "fork", [](auto& c) { CHECK(c.start_method == "fork"); }},
      {"log_dir", "/tmp/x", [](auto& c) { CHECK(c.log_dir == "/tmp/x"); }},
      {"node_rank", "0", [](auto& c) { CHECK(c.node_rank == 0); }},
      {"master_addr", "10.0.0.1", [](auto& c) { CHECK(c.master_addr == "10.0.0.1"); }},
      {"master_port", "1234", [](auto& c) { CHECK(c.master_port == 1234); }},
      {"local_addr", "10.0.0.2", [](auto& c) { CHECK(c.local_addr == "10.0.0.2"); }},
      {"local_ranks_filter", "0,1",
       [](auto& c) {
         CHECK(c.local_ranks_filter == std::set<int>{0, 1});
       }},
      {"log_line_prefix_template", "[${rank}]",
       [](auto& c) { CHECK(c.log_line_prefix_template == "[${rank}]"); }},
      {"duplicate_stdout_filters", "a,,b,c",
       [](auto& c) {
         CHECK(c.duplicate_stdout_filters == Strings{"a,b", "c"});
       }},
      {"duplicate_stderr_filters", "x",
       [](auto& c) { CHECK(c.duplicate_stderr_filters == Strings{"x"}); }},
      {"event_log_handler", "null", [](auto& c) { CHECK(c.event_log_handler == "null"); }},
      {"logs_specs", "custom", [](auto& c) { CHECK(c.logs_specs == "custom"); }},
      {"numa_binding", "socket", [](auto& c) { CHECK(c.numa_binding == "socket"); }},
      {"signals_to_handle", "SIGUSR1",
       [](auto& c) { CHECK(c.signals_to_handle == std::vector<int>{SIGUSR1}); }},
      {"shutdown_timeout", "2",
       [](auto& c) { CHECK(c.shutdown_timeout == std::chrono::milliseconds(2000)); }},
      {"event_log", "/tmp/ev.jsonl", [](auto& c) { CHECK(c.event_log == "/tmp/ev.jsonl"); }},
      {"log_level", "debug", [](auto& c) { CHECK(c.log_level == "debug"); }},
  };
  for (const Case& test : cases) {
    std::string dashed = test.under;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    for (const std::string& name : {test.under, dashed}) {
      INFO("--" << name);
      test.check(parse({"--" + name + "=" + test.value, "s.py"}));
      test.check(parse({"--" + name, test.value, "s.py"}));
    }
  }
}

TEST_CASE("every flag accepts both spellings and sets its field", "[cli]") {
  const auto flags = parse({"--no-python", "--run-path", "--virtual-local-rank", "--dry-run",
                            "--no-slurm", "--label", "--standalone", "s"});
  CHECK(flags.no_python);
  CHECK(flags.run_path);
  CHECK(flags.virtual_local_rank);
  CHECK(flags.dry_run);
  CHECK(flags.no_slurm);
  CHECK(flags.label);
  CHECK(flags.standalone);
  const auto under =
      parse({"--no_python", "--run_path", "--virtual_local_rank", "--dry_run", "--no_slurm", "s"});
  CHECK(under.no_python);
  CHECK(under.run_path);
  CHECK(under.virtual_local_rank);
  CHECK(under.dry_run);
  CHECK(under.no_slurm);
  CHECK(parse({"-m", "pkg.mod"}).module);
  CHECK(parse({"--module", "pkg.mod"}).module);
  CHECK_FALSE(parse({"s"}).module);
}

TEST_CASE("short options take attached or separate values", "[cli]") {
  CHECK(parse({"-r3", "s"}).redirects.all == kStdBoth);
  CHECK(parse({"-r", "1", "s"}).redirects.all == kStdOut);
  CHECK(parse({"-t=2", "s"}).tee.all == kStdErr);
  CHECK(parse({"--tee", "0:1,1:2", "s"}).tee.per_rank == std::map<int, int>{{0, 1}, {1, 2}});
}

TEST_CASE("unique prefixes resolve as argparse does", "[cli]") {
  CHECK(parse({"--nproc=2", "s"}).nproc_per_node == 2);
  CHECK(parse({"--nproc-per=2", "s"}).nproc_per_node == 2);
  CHECK(parse({"--max_r", "3", "s"}).max_restarts == 3);
  CHECK(parse({"--stand", "s"}).standalone);
  SECTION("an ambiguous prefix is an error listing the candidates") {
    CHECK_THROWS_WITH(parse({"--rdzv=x", "s"}),
                      Catch::Contains("ambiguous option: --rdzv could match --rdzv_backend"));
    CHECK_THROWS_WITH(parse({"--no", "s"}), Catch::Contains("--no_slurm"));
  }
  SECTION("an unknown option before the script is an error") {
    CHECK_THROWS_WITH(parse({"--bogus", "s"}), Catch::Contains("unrecognized option: --bogus"));
    CHECK_THROWS_WITH(parse({"-x", "s"}), Catch::Contains("unrecognized option: -x"));
  }
}

TEST_CASE("everything after the script goes to the worker untouched", "[cli]") {
  const auto config = parse({"--nproc_per_node=2", "train.py", "--nproc=3", "--max_restarts", "5",
                             "-m", "--help", "--rdzv", "$local_rank", "--"});
  CHECK(config.training_script == "train.py");
  CHECK(config.training_script_args ==
        Strings{"--nproc=3", "--max_restarts", "5", "-m", "--help", "--rdzv", "$local_rank", "--"});
  CHECK(config.nproc_per_node == 2);
  CHECK(config.max_restarts == 0);
  CHECK_FALSE(config.module);
  CHECK_FALSE(config.help);
}

TEST_CASE("a -- right after the script is removed, as torchrun 1.13 does", "[cli]") {
  CHECK(parse({"s.py", "--", "--x"}).training_script_args == Strings{"--x"});
  CHECK(parse({"s.py", "a", "--", "--x"}).training_script_args == Strings{"a", "--", "--x"});
  SECTION("a -- before the script ends our options") {
    const auto config = parse({"--no_python", "--", "--weird-name", "a"});
    CHECK(config.training_script == "--weird-name");
    CHECK(config.training_script_args == Strings{"a"});
  }
}

TEST_CASE("help is recognised only before the script", "[cli]") {
  CHECK(parse({"--help"}).help);
  CHECK(parse({"-h"}).help);
  CHECK(parse({"--nproc_per_node=bad", "--he"}).help);
  CHECK(parse({"-h", "--bogus"}).help);
  CHECK(usage().find("--nproc_per_node") != std::string::npos);
  CHECK(usage().find("--nproc-per-node") != std::string::npos);
}

TEST_CASE("usage errors name the option", "[cli]") {
  CHECK_THROWS_WITH(parse({}), Catch::Contains("training_script: missing"));
  CHECK_THROWS_WITH(parse({"--nproc_per_node"}),
                    Catch::Contains("--nproc_per_node: expected a value"));
  CHECK_THROWS_WITH(parse({"--standalone=1", "s"}),
                    Catch::Contains("--standalone: takes no value"));
  CHECK_THROWS_AS(parse({"--max_restarts=x", "s"}), ConfigError);
}

TEST_CASE("the last occurrence of a repeated option wins", "[cli]") {
  CHECK(parse({"--max_restarts=1", "--max-restarts=2", "s"}).max_restarts == 2);
}

TEST_CASE("PET_ variables fill options the command line left out", "[cli][env]") {
  const Env env = {{"PET_NPROC_PER_NODE", "4"}, {"PET_MAX_RESTARTS", "3"},
                   {"PET_RDZV_ID", "fromenv"},  {"PET_STANDALONE", "0"},
                   {"PET_NO_PYTHON", "1"},      {"PET_REDIRECTS", "3"}};
  const auto config = parse({"--max_restarts=1", "prog"}, env);
  CHECK(config.nproc_per_node == 4);
  CHECK(config.source_of("nproc_per_node") == ValueSource::kEnv);
  CHECK(config.max_restarts == 1);  // the command line beats the environment
  CHECK(config.source_of("max_restarts") == ValueSource::kCli);
  CHECK(config.rdzv_id == "fromenv");
  CHECK_FALSE(config.standalone);  // "0" means off
  CHECK(config.no_python);
  CHECK(config.redirects.all == kStdBoth);
  CHECK(config.source_of("role") == ValueSource::kDefault);
}

TEST_CASE("PET_ errors name the variable", "[cli][env]") {
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_MAX_RESTARTS", "many"}}),
                    Catch::StartsWith("PET_MAX_RESTARTS: expected an integer"));
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_STANDALONE", "yes"}}),
                    Catch::StartsWith("PET_STANDALONE (--standalone): expected an integer"));
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_NNODES", "0"}}), Catch::StartsWith("PET_NNODES:"));
}

TEST_CASE("numa_binding and logs_specs have no PET_ fallback, as in torchrun", "[cli][env]") {
  const auto config = parse({"s"}, {{"PET_NUMA_BINDING", "node"}, {"PET_LOGS_SPECS", "x"}});
  CHECK_FALSE(config.numa_binding);
  CHECK_FALSE(config.logs_specs);
}

}  // namespace
}  // namespace ddp::agent
