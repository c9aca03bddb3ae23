#pragma once
// The members of a round that have not joined the round forming after it, and the dead among
// them found by their agents' link stores, so that the forming round need not wait for their
// leases (two nodes lost at once: the first loss ends the round before the second is seen).

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/etcd/etcd_documents.hpp"
#include "rendezvous/etcd/etcd_kv.hpp"

namespace ddp::rdzv::etcd {

// The members of round `previous` that still hold their join key there and have not joined round
// previous.round + 1 (`absent`), and how many of them this call declared lost (`declared`).
struct Absentees {
  int absent = 0;
  int declared = 0;
};

// Declares lost (declare_lost) every member of round `previous` that still holds its join key
// there, has not joined round previous.round + 1, and whose agent's link store refuses a connect
// (each waited for at most `grace`): that agent has died (a live agent's link store accepts, and
// a cut link answers nothing, which leaves the verdict to the lease).
asio::awaitable<Absentees> declare_dead_absentees(std::shared_ptr<EtcdKv> client, std::string job,
                                                  RoundHeader previous,
                                                  std::chrono::milliseconds grace);

}  // namespace ddp::rdzv::etcd
