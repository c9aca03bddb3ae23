// The failure report: root cause, exit code rule, error files in both torchrun formats.

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/elastic/failure_report.hpp"

namespace ddp::agent {
namespace {

WorkerExit exit_of(int rank, int code, int signal, int order) {
  WorkerExit exit;
  exit.rank = rank;
  exit.local_rank = rank;
  exit.pid = 1000 + rank;
  exit.exit_code = code;
  exit.signal = signal;
  exit.mono_time = std::chrono::steady_clock::time_point(std::chrono::milliseconds(order));
  exit.wall_time = std::chrono::system_clock::now();
  return exit;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ddp_failure_report_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST_CASE("the exit code is the worker's code, or 128+N for signal N", "[report]") {
  CHECK(exit_code_for(exit_of(0, 7, 0, 0)) == 7);
  CHECK(exit_code_for(exit_of(0, 0, SIGKILL, 0)) == 137);
  CHECK(exit_code_for(exit_of(0, 0, SIGSEGV, 0)) == 128 + SIGSEGV);
}

TEST_CASE("reportable failures leave out successes and workers the agent stopped", "[report]") {
  auto stopped = exit_of(0, 0, SIGTERM, 5);
  stopped.stopped_by_agent = true;
  stopped.agent_signal = SIGTERM;
  const auto late = exit_of(1, 2, 0, 9);
  const auto first = exit_of(2, 3, 0, 1);
  const auto ok = exit_of(3, 0, 0, 0);
  const auto failures = reportable_failures({stopped, late, ok, first});
  REQUIRE(failures.size() == 2);
  CHECK(failures[0].rank == 2);  // ordered by time
  CHECK(failures[1].rank == 1);
}

TEST_CASE("issue 21: a worker that crashed on its own after the agent signalled it is listed",
          "[report]") {
  const auto root = exit_of(0, 1, 0, 1);
  auto crashed = exit_of(1, 1, 0, 2);  // exited 1 while being stopped: its own failure
  crashed.stopped_by_agent = true;
  crashed.agent_signal = SIGTERM;
  auto segfault = exit_of(2, 0, SIGSEGV, 3);  // another signal than the agent's
  segfault.stopped_by_agent = true;
  segfault.agent_signal = SIGTERM;
  auto killed = exit_of(3, 0, SIGKILL, 4);  // the agent's SIGKILL after the grace period
  killed.stopped_by_agent = true;
  killed.agent_signal = SIGKILL;
  const auto failures = reportable_failures({root, crashed, segfault, killed});
  REQUIRE(failures.size() == 3);
  CHECK(failures[1].rank == 1);
  CHECK(failures[2].rank == 2);
  const std::string report = format_failure_report("train.py", "h", failures);
  CHECK(report.find("<NO_OTHER_FAILURES>") == std::string::npos);
  CHECK(report.find("rank 1 (local_rank: 1) exitcode 1") != std::string::npos);
}

TEST_CASE("issue 21: the report names the interpreter, and how to pick another when an import "
          "failed",
          "[report]") {
  auto root = exit_of(0, 1, 0, 1);
  root.stderr_tail = {"Traceback (most recent call last):", "  File \"train.py\", line 1",
                      "ModuleNotFoundError: No module named 'torch'"};
  ReportContext context{"/opt/py/bin/python3", "python3 on PATH", "/tmp/ddprun_x/none_y", {}};
  const std::string report = format_failure_report("train.py", "h", {root}, context);
  CHECK(report.find("python    : /opt/py/bin/python3 (python3 on PATH)") != std::string::npos);
  CHECK(report.find("/opt/py/bin/python3 cannot import 'torch'") != std::string::npos);
  CHECK(report.find("--python=") != std::string::npos);
  CHECK(report.find("PYTHON_EXEC=") != std::string::npos);
  CHECK(report.find("logs kept in /tmp/ddprun_x/none_y") != std::string::npos);
  SECTION("no note without an import error") {
    root.stderr_tail = {"ValueError: boom"};
    const std::string plain = format_failure_report("train.py", "h", {root}, context);
    CHECK(plain.find("python    : /opt/py/bin/python3") != std::string::npos);
    CHECK(plain.find("cannot import") == std::string::npos);
  }
  CHECK(missing_python_module({"ImportError: cannot import name 'x'"}) == std::string());
  CHECK_FALSE(missing_python_module({"RuntimeError: no"}).has_value());
}

TEST_CASE("the report names the root cause, its stderr tail and the exit code", "[report]") {
  auto root = exit_of(1, 3, 0, 1);
  root.stderr_tail = {"Traceback (most recent call last):", "ValueError: boom"};
  const auto other = exit_of(0, 0, SIGKILL, 2);
  const std::string report = format_failure_report("train.py", "node7", {root, other});
  CHECK(report.find("train.py FAILED") != std::string::npos);
  CHECK(report.find("host      : node7") != std::string::npos);
  CHECK(report.find("rank      : 1 (local_rank: 1)") != std::string::npos);
  CHECK(report.find("exitcode  : 3 (pid: 1001)") != std::string::npos);
  CHECK(report.find("error_file: <N/A>") != std::string::npos);
  CHECK(report.find("    ValueError: boom") != std::string::npos);
  CHECK(report.find("rank 0 (local_rank: 0) exitcode -9 (pid: 1000) (SIGKILL)") !=
        std::string::npos);
  CHECK(report.find("ddprun exits with 3") != std::string::npos);
  CHECK(report.find("<NO_OTHER_FAILURES>") == std::string::npos);
  CHECK(report.find("note: ") == std::string::npos);
}

TEST_CASE("the report ends with the notes it is given, one line each", "[report]") {
  ReportContext context;
  context.notes = {
      "local ranks 0 were started again in round 2 (gone, or not using ddprun.elastic)"};
  const std::string report =
      format_failure_report("train.py", "node7", {exit_of(0, 3, 0, 1)}, context);
  CHECK(report.find("\nnote: local ranks 0 were started again in round 2 (gone, or not using "
                    "ddprun.elastic)\n") != std::string::npos);
}

TEST_CASE("a signal death says which signal, and SIGKILL with an OOM kill says so", "[report]") {
  auto root = exit_of(0, 0, SIGKILL, 1);
  root.oom_suspected = true;
  const std::string report = format_failure_report("x", "h", {root});
  CHECK(report.find("exitcode  : -9 (pid: 1000) (SIGKILL)") != std::string::npos);
  CHECK(report.find("Signal 9 (SIGKILL) received by PID 1000") != std::string::npos);
  CHECK(report.find("SIGKILL: possibly the OOM killer") != std::string::npos);
  CHECK(report.find("<NO_OTHER_FAILURES>") != std::string::npos);
  CHECK(report.find("ddprun exits with 137") != std::string::npos);
}

TEST_CASE("error files in torchrun's dict and string formats are read", "[report]") {
  SECTION("dict format with a traceback") {
    const auto path = temp_file("dict.json",
                                R"({"message": {"message": "ValueError: boom", "extraInfo": )"
                                R"({"py_callstack": "Traceback\nValueError: boom\n", )"
                                R"("timestamp": "1795352978"}}})");
    const auto record = read_error_file(path);
    REQUIRE(record);
    CHECK(record->message == "ValueError: boom");
    CHECK(record->traceback == "Traceback\nValueError: boom\n");
    CHECK(record->timestamp == 1795352978);
    auto root = exit_of(0, 1, 0, 0);
    root.error_file = path;
    const std::string report = format_failure_report("x", "h", {root});
    CHECK(report.find("error_file: " + path) != std::string::npos);
    CHECK(report.find("traceback : Traceback\n    ValueError: boom") != std::string::npos);
    std::filesystem::remove(path);
  }
  SECTION("string format") {
    const auto path = temp_file("str.json", R"({"message": "it broke", "timestamp": 12})");
    const auto record = read_error_file(path);
    REQUIRE(record);
    CHECK(record->message == "it broke");
    CHECK(record->timestamp == 12);
    std::filesystem::remove(path);
  }
  SECTION("not JSON") {
    const auto path = temp_file("bad.json", "not json");
    const auto record = read_error_file(path);
    REQUIRE(record);
    CHECK(record->message.find("not torchrun's JSON format") != std::string::npos);
    std::filesystem::remove(path);
  }
  SECTION("missing") { CHECK_FALSE(read_error_file("/nonexistent/error.json")); }
}

}  // namespace
}  // namespace ddp::agent
