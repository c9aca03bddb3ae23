#pragma once
// StoreGuard: who may use a TcpStoreServer (docs/security.md). The default guards nothing, as
// PyTorch's TCPStore: anyone who reaches the port may read, write and delete every key.

#include <memory>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/auth/member_list.hpp"

namespace ddp::rdzv {

struct StoreGuard {
  // The job's secret. Set: a connection that sends ddprun's HELLO must answer a fresh challenge
  // with it before its first request, and one that does not authenticate is served only when
  // `members` admits its address. Null: a HELLO is answered "not required".
  std::shared_ptr<const auth::Credentials> credentials;
  // Set: a connection that did not authenticate is served only from an address this list admits
  // (a store that serves PyTorch's workers, which cannot authenticate); without a secret, others
  // are refused at accept. Null: unauthenticated connections are served only without a secret.
  std::shared_ptr<const auth::MemberList> members;
  // Set: the address of every authenticated connection (every connection when there is no
  // secret) is held in this list while the connection is open: the rendezvous store tells the
  // workers' stores who the job's nodes are.
  std::shared_ptr<auth::MemberList> learn_into;
};

}  // namespace ddp::rdzv
