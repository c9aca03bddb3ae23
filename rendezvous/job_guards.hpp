#pragma once
// JobGuards: the StoreGuard of each store one agent serves for its job (docs/security.md), from
// the job's secret and --rdzv_conf worker_store_allow. The stores share one member list: the
// rendezvous store fills it with the addresses its agents connect from, the workers' stores
// admit PyTorch's clients from those addresses (and this node's own) only.

#include <memory>
#include <string>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/store_server/store_guard.hpp"

namespace ddp::rdzv {

struct JobSecurity {
  std::shared_ptr<const auth::Credentials> credentials;  // the job secret; null: none
  bool worker_store_members_only = true;  // false: --rdzv_conf worker_store_allow=any
};

class JobGuards {
 public:
  // Fills the member list with this machine's interface addresses.
  explicit JobGuards(JobSecurity security);

  // c10d's rendezvous store: agents authenticate when there is a secret; every connection's
  // address is learned (authenticated ones only, with a secret).
  StoreGuard rendezvous_store() const;
  // A store that serves only workers (c10d's and etcd's per round): members, or authenticated.
  StoreGuard worker_store() const;
  // The static store, which serves agents and workers: with a secret, agents authenticate and
  // workers are admitted from the authenticated agents' addresses; without one it is open.
  StoreGuard shared_store() const;

  const JobSecurity& security() const { return security_; }
  const std::shared_ptr<auth::MemberList>& members() const { return members_; }

 private:
  JobSecurity security_;
  std::shared_ptr<auth::MemberList> members_;
};

// The one warning an agent that hosts a store without a job secret prints when `host` (the
// address it serves on) is not loopback: "<what> at <host>:<port> is open to its network ...".
void warn_open_store(const std::string& what, const std::string& host, unsigned port);

}  // namespace ddp::rdzv
