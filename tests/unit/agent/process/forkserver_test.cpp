// ForkServer: which launches use it, the template's environment, and a real template (python3 on
// PATH, the embedded ddprun package, a stdlib preload) forking workers that a subreaper agent
// reaps with their exit codes, output and environment; a preload that fails to import.

#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iomanip>

#include "agent/cli/agent_options.hpp"
#include "agent/process/forkserver.hpp"
#include "agent/process/python_package.hpp"
#include "agent/process/worker_group.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/process/agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPython = "python3";

// A worker running `python3 -u -c code` with the embedded package on its PYTHONPATH.
WorkerSpec python_worker(const std::string& package_dir, const std::string& code, int rank) {
  WorkerSpec spec;
  spec.local_rank = spec.rank = spec.role_rank = rank;
  spec.argv = {kPython, "-u", "-c", code};
  spec.env = test::current_env();
  std::erase_if(spec.env, [](const std::string& e) { return e.starts_with("PYTHONPATH="); });
  spec.env.push_back("PYTHONPATH=" + package_dir);
  spec.env.push_back("RANK=" + std::to_string(rank));
  spec.ddprun_env["RANK"] = std::to_string(rank);
  spec.ddprun_env["PYTHONPATH"] = package_dir;
  return spec;
}

TEST_CASE("only --start_method=forkserver with a Python entry point forks", "[forkserver]") {
  LaunchConfig config;
  config.python = "/usr/bin/python3";
  CHECK_FALSE(forkserver_options(config).has_value());  // spawn
  config.start_method = "forkserver";
  config.preload = {"torch", "numpy"};
  config.preload_fallback = true;
  const auto options = forkserver_options(config);
  REQUIRE(options.has_value());
  CHECK(options->python == "/usr/bin/python3");
  CHECK(options->preload == std::vector<std::string>{"torch", "numpy"});
  CHECK(options->fallback);
  config.no_python = true;
  CHECK_FALSE(forkserver_options(config).has_value());
}

TEST_CASE("the template's environment drops ddprun's per-worker variables", "[forkserver]") {
  WorkerSpec spec;
  spec.env = {"HOME=/root", "OMP_NUM_THREADS=1", "PYTHONPATH=/run/python", "RANK=3",
              "TORCHELASTIC_ERROR_FILE=/x/error.json"};
  spec.ddprun_env = {{"OMP_NUM_THREADS", "1"},
                     {"PYTHONPATH", "/run/python"},
                     {"RANK", "3"},
                     {"TORCHELASTIC_ERROR_FILE", "/x/error.json"}};
  const auto env = template_env(spec);
  CHECK(env == std::vector<std::string>{"HOME=/root", "OMP_NUM_THREADS=1",
                                        "PYTHONPATH=/run/python"});
}

TEST_CASE("a preload module that fails to import is one line naming it", "[forkserver]") {
  test::TempDir dir;
  write_python_package(dir.path());
  const auto env = python_worker(dir.path(), "", 0).env;
  ForkServerOptions options{.python = kPython, .preload = {"json", "ddp_no_such_module"}};
  ForkServer server(options, env);  // starts, and reports nothing until asked
  const char* expected =
      "forkserver: cannot import module 'ddp_no_such_module': ModuleNotFoundError: "
      "No module named 'ddp_no_such_module'";
  CHECK_THROWS_WITH(server.await_ready(), expected);
  CHECK_FALSE(server.is_alive());
  CHECK_THROWS_WITH(server.await_ready(), expected);  // the same line for every later launch
}

TEST_CASE("the template imports while the caller's loop runs", "[forkserver]") {
  test::TempDir dir;
  write_python_package(dir.path());
  // The import waits for a file the loop creates: it can only finish if the loop ran meanwhile.
  const std::string gate = dir.path() + "/gate";
  const std::string module_dir = dir.path() + "/modules";
  std::filesystem::create_directories(module_dir);
  std::ofstream(module_dir + "/ddp_gated_import.py")
      << "import os, time\nwhile not os.path.exists(" << std::quoted(gate) << "):\n"
      << "    time.sleep(0.01)\n";
  auto env = python_worker(dir.path(), "", 0).env;
  std::erase_if(env, [](const std::string& e) { return e.starts_with("PYTHONPATH="); });
  env.push_back("PYTHONPATH=" + dir.path() + ":" + module_dir);
  ForkServer server(ForkServerOptions{.python = kPython, .preload = {"ddp_gated_import"}}, env);
  boost::asio::io_context io;
  bool ready = false;
  bool gate_was_open = false;
  boost::asio::co_spawn(io, server.until_ready(), [&](std::exception_ptr) {
    ready = true;
    gate_was_open = std::filesystem::exists(gate);
  });
  boost::asio::steady_timer open_gate(io, 50ms);
  open_gate.async_wait([&](boost::system::error_code) { std::ofstream(gate) << "open"; });
  io.run_for(30s);
  CHECK(ready);
  CHECK(gate_was_open);
  CHECK_FALSE(server.is_ready());
  CHECK_NOTHROW(server.await_ready());
  CHECK(server.is_ready());
  CHECK(server.is_alive());
}

TEST_CASE("forked workers are the agent's children: exit codes, output, env", "[forkserver]") {
  // The workers are reparented to the nearest subreaper: a forked child of the test.
  const int code = test::exit_code_as_subreaper([] {
    test::ConsoleFixture f;
    write_python_package(f.dir.path());
    std::vector<WorkerSpec> specs;
    for (int rank = 0; rank < 2; ++rank) {
      const std::string code_text = fmt::format(
          "import os, sys; print('rank', os.environ['RANK'], os.getppid() == {}); sys.exit({})",
          ::getpid(), 5 + rank);
      specs.push_back(python_worker(f.dir.path(), code_text, rank));
    }
    ForkServer server(ForkServerOptions{.python = kPython, .preload = {"json"}},
                      template_env(specs[0]));
    if (!server.runs(specs[0].argv) || server.runs({kPython, "script.py"})) return 3;
    for (int attempt = 0; attempt < 2; ++attempt) {  // the same template serves every attempt
      WorkerGroup group(f.io, f.options());
      group.start(specs, &server);
      test::run_until(f.io, [&] { return !group.running(); }, 20s);
      if (group.exits().size() != 2) return 4;
      for (const WorkerExit& e : group.exits()) {
        if (e.signal != 0 || e.exit_code != 5 + e.local_rank) return 5;
      }
    }
    const auto lines = test::lines_of(f.out.text());
    const auto seen = [&](const char* line) { return std::count(lines.begin(), lines.end(), line); };
    return seen("rank 0 True") == 2 && seen("rank 1 True") == 2 && server.is_alive() ? 0 : 6;
  });
  CHECK(code == 0);
}

}  // namespace
}  // namespace ddp::agent
