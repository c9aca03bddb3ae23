#pragma once
// LinkStoreGuard: who an etcd agent's link store (etcd_links.hpp) admits (docs/security.md). With
// the job's secret (a token file, or munge under SLURM) the agents authenticate, as on every
// store of the job. Without one, only loopback and the addresses of the nodes of the last round
// this agent hosts: the store lives for the agent's whole life, so its member list is replaced
// each round, and it is unsettled (a stranger's connection waits, unread) from the join until
// the round's records were read. Owned by the etcd backend, on the agent's io_context.

#include <boost/asio/ip/address.hpp>

#include <memory>
#include <vector>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/store_server/store_guard.hpp"

namespace ddp::rdzv::etcd {

class LinkStoreGuard {
 public:
  // members_only false (--rdzv_conf worker_store_allow=any) and no credentials: open.
  LinkStoreGuard(std::shared_ptr<const auth::Credentials> credentials, bool members_only);

  // The guard the link store is built with.
  StoreGuard guard() const;
  // True when the guard needs the addresses of each round's nodes (admit_round's argument).
  bool needs_members() const { return members_ != nullptr; }

  // This agent joins a round: connections from addresses it does not know yet wait.
  void open_round();
  // The round closed: `nodes` (the addresses in its member records when this agent hosts it;
  // empty otherwise) replace the previous round's; connections that were waiting are decided.
  void admit_round(const std::vector<boost::asio::ip::address>& nodes);

 private:
  std::shared_ptr<const auth::Credentials> credentials_;
  std::shared_ptr<auth::MemberList> members_;  // null: authenticated, or open
  std::vector<auth::MemberList::Hold> round_;  // the current round's nodes
};

}  // namespace ddp::rdzv::etcd
