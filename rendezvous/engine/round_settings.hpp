#pragma once
// RoundSettings: the knobs every elastic rendezvous backend reads, in rendezvous terms (c10d's
// C10dSettings and etcd's EtcdSettings add their own). The agent fills them from --nnodes and
// --rdzv_conf (torchrun's keys and defaults); tests use short timeouts.

#include <chrono>
#include <string>

namespace ddp::rdzv {

struct RoundSettings {
  std::string run_id = "none";  // keys live under /ddprun/<run_id>/
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};      // whole round
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(30)};  // after min joined
  // A node whose connection (c10d: to the store; etcd: its link to the round's host) closed and
  // was not re-made within this is lost (rdzv_conf connection_grace_ms). Heartbeats or leases
  // still catch what a closed connection cannot show (a cut link, a frozen machine).
  std::chrono::milliseconds connection_grace{300};
  // After a worker failure, how long beyond the backend's time to find a loss to wait for the
  // loss verdict (failure_verdict).
  std::chrono::milliseconds verdict_margin{1000};
  std::chrono::milliseconds progress_interval{std::chrono::seconds(5)};  // "3/4 joined" logs
};

}  // namespace ddp::rdzv
