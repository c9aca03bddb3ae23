// Issue 33: torchrun's file timer (TORCHELASTIC_ENABLE_FILE_TIMER) table and the health check's
// reply, without processes or sockets. The real pipe with PyTorch's FileTimerClient is in
// tests/integration/parity.

#include <catch2/catch.hpp>

#include "agent/core/health_check_server.hpp"
#include "agent/elastic/file_timers.hpp"

namespace ddp::agent {
namespace {

FileTimerRequest request(pid_t pid, const std::string& scope, double expiration, int signal) {
  return FileTimerRequest{.pid = pid, .scope_id = scope, .expiration_time = expiration,
                          .signal = signal};
}

TEST_CASE("file timer requests parse as FileTimerClient writes them", "[file_timer]") {
  const auto parsed = parse_file_timer_request(
      R"({"version": 1, "pid": 4711, "scope_id": "step", "expiration_time": 17.5, "signal": 9})");
  REQUIRE(parsed);
  CHECK(parsed->pid == 4711);
  CHECK(parsed->scope_id == "step");
  CHECK(parsed->expiration_time == 17.5);
  CHECK(parsed->signal == 9);
  CHECK(parse_file_timer_request(R"({"pid": 1, "scope_id": "s", "expiration_time": -1})"));
  for (const char* bad : {"", "not json", "[]", R"({"pid": 1, "expiration_time": 1})",
                          R"({"pid": "1", "scope_id": "s", "expiration_time": 1})",
                          R"({"pid": 0, "scope_id": "s", "expiration_time": 1})",
                          R"({"pid": -1, "scope_id": "s", "expiration_time": 1})"}) {
    CHECK_FALSE(parse_file_timer_request(bad));
  }
}

TEST_CASE("expired timers pick the earliest signal and clear the process", "[file_timer]") {
  FileTimers timers;
  timers.apply(request(10, "late", 20, 15));
  timers.apply(request(10, "early", 5, 0));    // no signal: reported, the next one is used
  timers.apply(request(10, "middle", 8, 9));
  timers.apply(request(11, "fine", 100, 9));
  timers.apply(request(12, "released", 1, 9));
  timers.apply(request(12, "released", -1, 0));  // release
  CHECK(timers.next_expiration() == 5);
  CHECK(timers.take_expired(4).empty());
  const auto expired = timers.take_expired(30);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].pid == 10);
  CHECK(expired[0].scopes == std::vector<std::string>{"early", "middle", "late"});
  CHECK(expired[0].signal == 9);
  CHECK(timers.size() == 1);  // pid 11 only
  CHECK(timers.next_expiration() == 100);
  timers.forget_gone([](pid_t pid) { return pid != 11; });
  CHECK(timers.size() == 0);
  CHECK_FALSE(timers.next_expiration());
}

TEST_CASE("a timer with no signal is reported and sends nothing", "[file_timer]") {
  FileTimers timers;
  timers.apply(request(7, "quiet", 1, 0));
  const auto expired = timers.take_expired(2);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].signal == 0);
}

TEST_CASE("the health check answers 200 while progress is recent, else 503", "[health]") {
  const auto alive = health_reply(1000, 1030, std::chrono::seconds(60));
  CHECK(alive.status == 200);
  CHECK(alive.body ==
        "{\"version\": 1, \"alive\": true, \"last_progress_time\": 1000, \"now\": 1030, "
        "\"timeout\": 60}\n");
  const auto stale = health_reply(1000, 1061, std::chrono::seconds(60));
  CHECK(stale.status == 503);
  CHECK(stale.body.find("\"alive\": false") != std::string::npos);
}

}  // namespace
}  // namespace ddp::agent
