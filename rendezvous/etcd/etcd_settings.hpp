#pragma once
// EtcdSettings: the knobs of one etcd rendezvous, in rendezvous terms. The agent fills them from
// --nnodes and --rdzv_conf; tests use short timeouts.

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp::rdzv::etcd {

struct EtcdSettings {
  std::string run_id = "none";  // keys live under /ddprun/<run_id>/
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};      // whole round
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(30)};  // after min joined
  std::chrono::seconds lease_ttl{10};  // a node is lost this long after its last keep-alive
  // A node whose link to the round's host (etcd_links.hpp) closed and was not re-made within
  // this is lost at once (rdzv_conf connection_grace_ms); a silent link waits for the lease.
  std::chrono::milliseconds connection_grace{300};
  // failure_verdict waits a lease TTL plus this for a lost node's lease to expire.
  std::chrono::milliseconds verdict_margin{1500};
  std::chrono::milliseconds progress_interval{std::chrono::seconds(5)};  // "3/4 joined" logs
};

// https (--rdzv_conf protocol=https): the user's files; every path may be empty.
struct TlsFiles {
  std::string cacert;  // PEM CA certificates the members' certificates must chain to;
                       // empty: the system's CA store
  std::string cert;    // PEM client certificate (chain) for mutual TLS
  std::string key;     // its PEM private key; empty with `cert` given: `cert` holds the key too
};

// This node as the other nodes see it.
struct EtcdNode {
  std::string addr;  // advertised address (--local_addr, or the interface routing to etcd)
  std::string name;  // unique in the job: "<addr>_<pid>"
  std::uint16_t link_port = 0;  // this agent's link store (etcd_links.hpp); 0: none
};

}  // namespace ddp::rdzv::etcd
