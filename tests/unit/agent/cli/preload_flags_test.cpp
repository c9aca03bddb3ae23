// --start_method=forkserver's flags: --preload (PET_PRELOAD, default torch, module names only)
// and --preload_fallback.

#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "agent/cli/agent_options.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::parse;
using Modules = std::vector<std::string>;

TEST_CASE("issue 30: --preload defaults to torch and takes comma-separated modules", "[cli]") {
  const auto defaults = parse({"s"});
  CHECK(defaults.start_method == "spawn");
  CHECK(defaults.preload == Modules{"torch"});
  CHECK_FALSE(defaults.preload_fallback);
  const auto given = parse({"--start_method=forkserver", "--preload", "torch,numpy.linalg,_x1",
                            "--preload_fallback", "s"});
  CHECK(given.start_method == "forkserver");
  CHECK(given.preload == Modules{"torch", "numpy.linalg", "_x1"});
  CHECK(given.preload_fallback);
  CHECK(parse({"--preload=", "s"}).preload.empty());
  CHECK(parse({"s"}, {{"PET_PRELOAD", "json"}}).preload == Modules{"json"});
  CHECK(parse({"s"}, {{"PET_PRELOAD_FALLBACK", "1"}}).preload_fallback);
}

TEST_CASE("issue 30: a --preload entry that is no module name names the flag", "[cli]") {
  for (const char* bad : {"torch,,numpy", "a b", "1abc", "torch.", ".x", "torch,"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse({"--preload", bad, "s"}), ConfigError);
    CHECK_THROWS_WITH(parse({"--preload", bad, "s"}), Catch::StartsWith("--preload: '"));
  }
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_PRELOAD", "x y"}}),
                    Catch::StartsWith("PET_PRELOAD: 'x y' is not a module name"));
}

TEST_CASE("issue 29: --recovery=inprocess forks Python workers unless --start_method is given",
          "[cli]") {
  const auto inprocess = forkserver_options(parse({"--recovery=inprocess", "s.py"}));
  REQUIRE(inprocess.has_value());
  CHECK(inprocess->preload == Modules{"torch"});
  CHECK(inprocess->fallback);  // a template nobody asked for never fails the launch
  CHECK(inprocess->by_default);
  CHECK(forkserver_options(parse({"s.py"}, {{"PET_RECOVERY", "inprocess"}})).has_value());
  CHECK_FALSE(forkserver_options(parse({"s.py"})).has_value());  // restart: exec
  CHECK_FALSE(forkserver_options(parse({"--recovery=inprocess", "--no_python", "s"})).has_value());
  for (const char* method : {"spawn", "fork"}) {
    CAPTURE(method);
    CHECK_FALSE(forkserver_options(parse({"--recovery=inprocess",
                                          fmt::format("--start_method={}", method), "s.py"}))
                    .has_value());
    CHECK_FALSE(
        forkserver_options(parse({"--recovery=inprocess", "s.py"}, {{"PET_START_METHOD", method}}))
            .has_value());
  }
  const auto asked = forkserver_options(
      parse({"--recovery=inprocess", "--start_method=forkserver", "--preload=json", "s.py"}));
  REQUIRE(asked.has_value());
  CHECK(asked->preload == Modules{"json"});
  CHECK_FALSE(asked->fallback);  // asked for: a template that cannot start fails the launch
  CHECK_FALSE(asked->by_default);
}

}  // namespace
}  // namespace ddp::agent
