#pragma once
// EtcdSettings: the knobs of one etcd rendezvous, in rendezvous terms. The agent fills them from
// --nnodes and --rdzv_conf; tests use short timeouts.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/engine/round_settings.hpp"

namespace ddp::rdzv::etcd {

// connection_grace is the link to the round's host (etcd_links.hpp); failure_verdict waits a
// lease TTL plus verdict_margin (1.5 s here) for a lost node's lease to expire.
struct EtcdSettings : RoundSettings {
  EtcdSettings() { verdict_margin = std::chrono::milliseconds(1500); }
  std::chrono::seconds lease_ttl{10};  // a node is lost this long after its last keep-alive
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
  std::vector<std::string> addresses = {};  // every address the node holds but loopback
  std::uint16_t link_port = 0;  // this agent's link store (etcd_links.hpp); 0: none
  int rank_hint = -1;           // >= 0: members sort by it, then by arrival (header_for)
};

}  // namespace ddp::rdzv::etcd
