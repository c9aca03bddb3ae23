#pragma once
// RoundWorkerGuard: who an etcd round's workers' store admits (docs/security.md): the addresses
// of the round's nodes, from their member records, and loopback, as c10d's. Every node opens a
// store when it joins; until the round closed its list is unsettled (a stranger's connection
// waits, unread); then group rank 0, whose store the workers use, admits every address the
// round's member records name (round_node_addresses), and every other node's store admits nobody
// new. Owned by the etcd backend, on the agent's io_context.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>

#include <memory>
#include <string>
#include <vector>

#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/etcd/etcd_kv.hpp"
#include "rendezvous/rendezvous.hpp"
#include "rendezvous/store_server/store_guard.hpp"

namespace ddp::rdzv::etcd {

class RoundWorkerGuard {
 public:
  // members_only false: --rdzv_conf worker_store_allow=any (every store admits everyone).
  explicit RoundWorkerGuard(bool members_only) : members_only_(members_only) {}

  // The guard of a new round's store: loopback and this node's addresses now, the round's
  // nodes once admit_round() ran.
  StoreGuard open_round();
  // True when admit_round needs the round's node addresses (at group rank 0).
  bool needs_members() const { return members_only_; }
  // After the round closed with `info`: on group rank 0, admits `nodes` (the round's
  // round_node_addresses); then settles the list.
  void admit_round(const RendezvousInfo& info,
                   const std::vector<boost::asio::ip::address>& nodes);

 private:
  bool members_only_;
  std::shared_ptr<auth::MemberList> members_;  // the current round's
};

// This node's addresses as member records carry them (auth::is_reportable ones, as text).
std::vector<std::string> node_addresses();

// Every address the member records of `round` name: each node's advertised address and every
// one its node holds. One range read; throws IoError when etcd cannot be read.
boost::asio::awaitable<std::vector<boost::asio::ip::address>> round_node_addresses(
    EtcdKv& client, const std::string& run_id, int round);

}  // namespace ddp::rdzv::etcd
