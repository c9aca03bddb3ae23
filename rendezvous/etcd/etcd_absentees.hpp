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

// Declares lost (declare_lost) every member of round `previous` that still holds its join key
// there, has not joined round previous.round + 1, and whose agent's link store refuses a connect
// (each waited for at most `grace`): that agent has died (a live agent's link store accepts, and
// a cut link answers nothing, which leaves the verdict to the lease). Returns how many it
// declared.
asio::awaitable<int> declare_dead_absentees(std::shared_ptr<EtcdKv> client, std::string job,
                                            RoundHeader previous,
                                            std::chrono::milliseconds grace);

}  // namespace ddp::rdzv::etcd
