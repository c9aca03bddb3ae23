// The event log's JSON lines.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/event_log.hpp"
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

}  // namespace
}  // namespace ddp::agent
