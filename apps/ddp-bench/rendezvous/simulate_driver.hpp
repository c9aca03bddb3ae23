#pragma once
// The rendezvous simulation's driver: starts the store (or uses --store), spreads K members over
// P shard processes, and takes the figures: formation, one round's requests and bytes per member,
// heartbeat load over a window, and a member's loss to the survivors' next round.

#include <chrono>
#include <cstdint>
#include <string>

#include "apps/ddp-bench/rendezvous/counting_store.hpp"

namespace ddp::bench {

struct SimulateOptions {
  int k = 0;
  int procs = 0;           // 0: enough that no process holds more than 15,000 connections
  int per_connection =
      0;  // members per link of 3 connections; 0: 1 up to K = 6,000, else 3K/18,000
  std::string store;       // "H:P"; empty: start `ddp-store serve` next to this program
  std::chrono::milliseconds keep_alive{std::chrono::seconds(5)};
  int keep_alive_attempts = 3;
  std::chrono::milliseconds window{0};  // heartbeat window; 0: two keep-alive intervals
  std::chrono::seconds phase_timeout{600};
};

struct PhaseCost {  // what the members did in one round, summed
  int members = 0;
  WireCounts counts;
  double store_cpu_s = -1;  // -1: the store's process is not known
  double members_cpu_s = 0;  // the shard processes' CPU seconds (the members' own side)
};

struct SimulateReport {
  int k = 0;
  int procs = 0;
  int per_connection = 0;
  int connections = 0;  // at the store
  double keep_alive_s = 0;
  int keep_alive_attempts = 0;
  double formed_s = 0;  // first member's join to the last member knowing its place
  PhaseCost round;
  double heartbeat_window_s = 0;
  double heartbeat_requests_per_s = 0;
  double heartbeat_request_bytes_per_s = 0;
  double heartbeat_store_cpu = -1;  // share of one core; -1: unknown
  double loss_detected_s = 0;   // the member died -> the first survivor saw the change
  double loss_reformed_s = 0;   // -> every survivor knows its place in the next round
  PhaseCost loss_round;         // the survivors' next round (from seeing the change)
  std::string error;  // the phase after formation that failed; figures after it stay 0
};

// Runs the whole simulation. `self` is this program's path (the shards run it with --shard).
// Throws Error naming the phase that failed or timed out, or the member that failed, up to the
// first round's figures; a later phase that fails is named in SimulateReport::error.
SimulateReport run_simulation(const SimulateOptions& options, const std::string& self);

}  // namespace ddp::bench
