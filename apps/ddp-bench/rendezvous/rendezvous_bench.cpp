// ddp-bench rendezvous --simulate K [--procs P] [--backend c10d] [--store H:P] [--json]: K c10d
// rendezvous members, the real member code as coroutines spread over P processes, against a real
// store; prints how long the round takes to form, what one round costs a member in store
// requests and bytes, the heartbeat load, and how long a loss takes to re-form
// (docs/rendezvous.md). With --shard FIRST:LAST it is one of those processes (started by the
// driver).

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "apps/ddp-bench/rendezvous/simulate_driver.hpp"
#include "apps/ddp-bench/rendezvous/simulate_shard.hpp"
#include "ddp/error.hpp"

namespace {

using ddp::bench::PhaseCost;
using ddp::bench::SimulateReport;

nlohmann::json per_member(const PhaseCost& c) {
  const double n = c.members > 0 ? c.members : 1;
  return {{"members", c.members},
          {"requests_per_member", static_cast<double>(c.counts.requests) / n},
          {"request_bytes_per_member", static_cast<double>(c.counts.request_bytes) / n},
          {"reply_bytes_per_member", static_cast<double>(c.counts.reply_bytes) / n},
          {"store_cpu_s", c.store_cpu_s},
          {"members_cpu_s", c.members_cpu_s}};
}

nlohmann::json to_json(const SimulateReport& r) {
  return {{"k", r.k},
          {"procs", r.procs},
          {"members_per_connection", r.per_connection},
          {"store_connections", r.connections},
          {"keep_alive_interval_s", r.keep_alive_s},
          {"keep_alive_max_attempt", r.keep_alive_attempts},
          {"formed_s", r.formed_s},
          {"round", per_member(r.round)},
          {"heartbeat",
           {{"window_s", r.heartbeat_window_s},
            {"requests_per_s", r.heartbeat_requests_per_s},
            {"requests_per_member_per_s", r.heartbeat_requests_per_s / r.k},
            {"request_bytes_per_s", r.heartbeat_request_bytes_per_s},
            {"store_cpu_share", r.heartbeat_store_cpu}}},
          {"loss",
           {{"detected_s", r.loss_detected_s},
            {"reformed_s", r.loss_reformed_s},
            {"reform_after_detection_s", r.loss_reformed_s - r.loss_detected_s},
            {"round", per_member(r.loss_round)}}},
          {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)}};
}

void print_text(const SimulateReport& r) {
  const auto per = [](const PhaseCost& c, std::int64_t v) {
    return static_cast<double>(v) / (c.members > 0 ? c.members : 1);
  };
  std::printf("K=%d members over %d processes, %d per connection (%d store connections)\n", r.k,
              r.procs, r.per_connection, r.connections);
  std::printf("formed: %.2f s from the first join to every member knowing its place\n",
              r.formed_s);
  std::printf("one round per member: %.2f requests, %.0f bytes sent, %.0f bytes received "
              "(store CPU %.2f s, members' CPU %.2f s)\n", per(r.round, r.round.counts.requests),
              per(r.round, r.round.counts.request_bytes),
              per(r.round, r.round.counts.reply_bytes), r.round.store_cpu_s,
              r.round.members_cpu_s);
  std::printf("heartbeats (keep_alive_interval %.0f s): %.0f requests/s (%.3f per member), "
              "store CPU %.1f %% of a core\n", r.keep_alive_s, r.heartbeat_requests_per_s,
              r.heartbeat_requests_per_s / r.k, 100 * r.heartbeat_store_cpu);
  std::printf("loss (keep_alive_max_attempt %d): seen %.2f s after the member went silent, "
              "every survivor placed at %.2f s (%.2f s after it was seen); %.2f requests per "
              "survivor\n", r.keep_alive_attempts, r.loss_detected_s, r.loss_reformed_s,
              r.loss_reformed_s - r.loss_detected_s,
              per(r.loss_round, r.loss_round.counts.requests));
  if (!r.error.empty()) std::printf("stopped early: %s\n", r.error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulate K c10d rendezvous members against a real store.",
               "ddp-bench rendezvous"};
  ddp::bench::SimulateOptions o;
  std::string backend = "c10d";
  std::string shard;
  int keep_alive_ms = 5000;
  double window_s = 0;
  bool json = false;
  app.add_option("--simulate", o.k, "members to simulate")
      ->required()
      ->check(CLI::Range(2, 1000000));
  app.add_option("--procs", o.procs, "processes to spread them over (default: by connections)")
      ->check(CLI::Range(1, 64));
  app.add_option("--backend", backend, "rendezvous backend (c10d only)")->capture_default_str();
  app.add_option("--store", o.store, "H:P of a running store (default: start ddp-store serve)");
  app.add_option("--per-connection", o.per_connection,
                 "members per link of 3 store connections (default: 1 up to K=6,000, else "
                 "3K/18,000)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--keep-alive-ms", keep_alive_ms, "keep_alive_interval in ms")
      ->capture_default_str()->check(CLI::Range(100, 600000));
  app.add_option("--keep-alive-attempts", o.keep_alive_attempts, "keep_alive_max_attempt")
      ->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--window", window_s, "heartbeat window in seconds (default: 2 intervals)");
  app.add_option("--shard", shard, "FIRST:LAST (internal: run as one of the driver's processes)");
  app.add_flag("--json", json, "print one JSON object");
  try {
    app.parse(argc, argv);
    if (backend != "c10d") {
      throw CLI::ValidationError("--backend", "only c10d is simulated, not '" + backend + "'");
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.keep_alive = std::chrono::milliseconds(keep_alive_ms);
  o.window = std::chrono::milliseconds(static_cast<std::int64_t>(window_s * 1000));

  if (!shard.empty()) {
    ddp::bench::ShardOptions s;
    const auto colon = shard.find(':');
    const auto store_colon = o.store.rfind(':');
    s.first = std::stoi(shard.substr(0, colon));
    s.last = std::stoi(shard.substr(colon + 1));
    s.host = o.store.substr(0, store_colon);
    s.port = static_cast<std::uint16_t>(std::stoi(o.store.substr(store_colon + 1)));
    s.k = o.k;
    s.per_connection = o.per_connection;
    s.keep_alive = o.keep_alive;
    s.keep_alive_attempts = o.keep_alive_attempts;
    return ddp::bench::run_shard(s);
  }
  if (!o.store.empty() && o.store.find(':') == std::string::npos) {
    std::fprintf(stderr, "ddp-bench rendezvous: --store wants HOST:PORT, not '%s'\n",
                 o.store.c_str());
    return 2;
  }
  try {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const SimulateReport report = ddp::bench::run_simulation(o, self);
    if (json) {
      std::printf("%s\n", to_json(report).dump().c_str());
    } else {
      print_text(report);
    }
    if (!report.error.empty()) std::fprintf(stderr, "%s\n", report.error.c_str());
    return report.error.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
