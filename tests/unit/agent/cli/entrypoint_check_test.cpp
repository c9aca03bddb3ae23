// Errors before anything starts (issue 33): a missing interpreter, script, module or program is a
// ConfigError (exit 2 in main) before the rendezvous. Module lookups run the real python3.

#include <catch2/catch.hpp>

#include "agent/cli/entrypoint_check.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"
#include "tests/unit/common/temp_dir.hpp"

namespace ddp::agent {
namespace {

using ddp::test::TempDir;
using test::Env;
using test::parse;

Env real_env() {
  Env env;
  if (const char* path = std::getenv("PATH")) env["PATH"] = path;
  return env;
}

ModuleLookup lookup(const std::string& module, const Env& env = real_env()) {
  return find_python_module("python3", module, env, std::chrono::seconds(20));
}


TEST_CASE("the module finder finds modules and packages without importing them",
          "[cli][entrypoint]") {
  CHECK(lookup("timeit") == ModuleLookup::kFound);
  CHECK(lookup("json.decoder") == ModuleLookup::kFound);
  CHECK(lookup("unittest") == ModuleLookup::kFound);  // a package with __main__
  CHECK(lookup("ddprun_no_such_module") == ModuleLookup::kMissing);
  CHECK(lookup("json.no_such_part") == ModuleLookup::kMissing);
  CHECK(lookup("email") == ModuleLookup::kMissing);  // a package without __main__: not runnable
  SECTION("a parent package whose __init__ would fail is not run") {
    const TempDir dir;
    dir.write("pkg/__init__.py", "raise SystemExit(5)\n");
    dir.write("pkg/train.py", "print('train')\n");
    Env env = real_env();
    env["PYTHONPATH"] = dir.path();
    CHECK(lookup("pkg.train", env) == ModuleLookup::kFound);
    CHECK(lookup("pkg.eval", env) == ModuleLookup::kMissing);
  }
  SECTION("an interpreter that cannot start gives no answer") {
    CHECK(find_python_module("/nonexistent/python3", "timeit", real_env(),
                             std::chrono::seconds(5)) == ModuleLookup::kUnknown);
  }
}

TEST_CASE("a missing entry point is one line naming it", "[cli][entrypoint]") {
  const Env env = real_env();
  CHECK_THROWS_WITH(check_entrypoint(parse({"no_such_script.py"}, env), env),
                    "training_script: 'no_such_script.py': no such file");
  CHECK_THROWS_WITH(check_entrypoint(parse({"-m", "ddprun_no_such_module"}, env), env),
                    "-m/--module: no module named 'ddprun_no_such_module' for interpreter "
                    "'python3'");
  CHECK_NOTHROW(check_entrypoint(parse({"-m", "json.tool"}, env), env));
  CHECK_NOTHROW(check_entrypoint(parse({"-m", "ddprun.anything"}, env), env));  // shipped
  CHECK_THROWS_WITH(check_entrypoint(parse({"--no_python", "ddp_no_such_program"}, env), env),
                    Catch::StartsWith("training_script: 'ddp_no_such_program' is not an "
                                      "executable program found in PATH"));
  CHECK_NOTHROW(check_entrypoint(parse({"--no_python", "true"}, env), env));
  const TempDir dir;
  dir.write("ok.py", "print('ok')\n");
  CHECK_NOTHROW(check_entrypoint(parse({dir.file("ok.py")}, env), env));
}

TEST_CASE("a missing interpreter names where it came from", "[cli][entrypoint]") {
  Env env = real_env();
  const TempDir dir;
  dir.write("ok.py", "print('ok')\n");
  const std::string script = dir.file("ok.py");
  CHECK_THROWS_WITH(check_entrypoint(parse({"--python", "/nonexistent/py", script}, env), env),
                    "--python: interpreter '/nonexistent/py' does not exist or is not executable");
  env["PYTHON_EXEC"] = "python_no_such_version";
  CHECK_THROWS_WITH(check_entrypoint(parse({script}, env), env),
                    Catch::StartsWith("PYTHON_EXEC: 'python_no_such_version' not found in PATH"));
  env.erase("PYTHON_EXEC");
  CHECK_NOTHROW(check_entrypoint(parse({script}, Env{}), Env{}));  // no PATH: /bin:/usr/bin
  env["PATH"] = dir.path();
  CHECK_THROWS_WITH(check_entrypoint(parse({"-m", "timeit"}, env), env),
                    "interpreter: 'python3' not found in PATH (give --python or PYTHON_EXEC)");
}

}  // namespace
}  // namespace ddp::agent
