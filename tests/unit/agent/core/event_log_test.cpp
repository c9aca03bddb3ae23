// The event log's JSON lines.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <cerrno>

#include "agent/core/event_log.hpp"
#include "agent/core/write_failure.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

TEST_CASE("an event is one JSON object with version, name, both clocks and its fields",
          "[event_log]") {
  Event event("worker_exited");
  event.with("rank", 3)
      .with("signal", std::string("SIGKILL"))
      .with("pids", std::vector<std::int64_t>{1, 2});
  const std::string line = to_json_line(event);
  CHECK(line.find('\n') == std::string::npos);
  const auto doc = nlohmann::json::parse(line);
  CHECK(doc["version"] == 1);
  CHECK(doc["event"] == "worker_exited");
  CHECK(doc["wall_time"].get<double>() > 1.6e9);
  CHECK(doc["mono_time"].is_number());
  CHECK(doc["rank"] == 3);
  CHECK(doc["signal"] == "SIGKILL");
  CHECK(doc["pids"] == nlohmann::json::array({1, 2}));
  CHECK(line.find("\"version\"") < line.find("\"event\""));  // fixed key order
}

TEST_CASE("the event log appends one line per event and names the flag when it cannot open",
          "[event_log]") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ddp_event_log_test_" + std::to_string(::getpid()) + ".jsonl");
  {
    JsonLinesEventLog log(path.string());
    log.emit(Event("rendezvous").with("round", 0));
    log.emit(Event("finish").with("exit_code", 0));
  }
  std::ifstream in(path);
  std::string first, second, third;
  REQUIRE(std::getline(in, first));
  REQUIRE(std::getline(in, second));
  CHECK_FALSE(std::getline(in, third));
  CHECK(nlohmann::json::parse(first)["event"] == "rendezvous");
  CHECK(nlohmann::json::parse(second)["exit_code"] == 0);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(JsonLinesEventLog("/nonexistent/dir/events.jsonl"),
                    Catch::Contains("--event_log"));
}

TEST_CASE("issue 19: a failed event log write is reported and the log counts as lost",
          "[event_log]") {
  JsonLinesEventLog log("/dev/full");  // every write fails with ENOSPC
  CHECK_FALSE(log.has_lost_events());
  log.emit(Event("rendezvous").with("round", 0));
  CHECK(log.has_lost_events());
  log.emit(Event("finish").with("exit_code", 0));  // no second report, no crash
  NullEventSink null;
  TeeEventSink tee({&null, nullptr, &log});
  CHECK(tee.has_lost_events());
  CHECK_FALSE(TeeEventSink({&null}).has_lost_events());
}

TEST_CASE("each kind of lost output is reported once, and a closed console pipe is no failure",
          "[event_log]") {
  // This binary's only kWorkerLogs and kConsole reports happen here.
  CHECK(report_write_failure(WriteTarget::kWorkerLogs, "/logs/0/stdout.log", ENOSPC));
  CHECK_FALSE(report_write_failure(WriteTarget::kWorkerLogs, "/logs/1/stdout.log", ENOSPC));
  CHECK_FALSE(report_write_failure(WriteTarget::kConsole, "stdout", EPIPE));
  CHECK(report_write_failure(WriteTarget::kConsole, "stdout", EIO));
  CHECK_FALSE(report_write_failure(WriteTarget::kConsole, "stdout", EIO));
}

}  // namespace
}  // namespace ddp::agent
