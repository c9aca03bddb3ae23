#pragma once
// Loss by connection for an etcd round (docs/rendezvous.md, "etcd: node loss by a closed
// connection"). Every etcd agent serves a link store (a TcpStoreServer for its whole life); while
// a round runs, each member keeps two connections to the link store of the round's group rank 0
// (the host) and holds a store lease there (store_lease.hpp). A member whose connection closes
// and stays closed for connection_grace has died: the host's store appends the member's line and
// the host's RoundLink reports it. A host that died closes every member's connection and refuses
// new ones: a member whose connection closed and whose reconnects are refused for the grace
// reports the host. Whoever reports a loss declares it in etcd (declare_lost), which every
// survivor's watch carries at once; etcd's lease stays the judge of a silent (cut) link, which
// closes nothing. The link store admits the job's agents only (etcd_link_guard.hpp). Runs on the
// agent's io_context; owned by EtcdRendezvous, one per running round.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/etcd/etcd_kv.hpp"
#include "rendezvous/etcd/etcd_documents.hpp"

namespace ddp::rdzv {
class MemoryStore;
}

namespace ddp::rdzv::etcd {

// A node of the round found gone: its name, its group rank, and how long its connection had been
// closed when the grace ran out.
using LinkLoss =
    std::function<void(std::string node, int group_rank, std::chrono::milliseconds after)>;

// What a member needs to hold its link to the round's host.
struct LinkTarget {
  std::string host_addr;  // the host agent's advertised address
  std::uint16_t port = 0;  // its link store
  int round = 0;
  std::string self;       // this member's name
  int group_rank = 0;     // this member's group rank
  std::string host;       // the host's name (group rank 0)
  std::chrono::milliseconds grace{300};
};

class RoundLink {
 public:
  // The host's side: reports every member of `round` whose lease in `links` (this agent's link
  // store) expires. `links` must outlive the link or its stop().
  static std::unique_ptr<RoundLink> watch_members(MemoryStore& links, int round,
                                                  LinkLoss on_lost);
  // A member's side: connects to the host's link store and leases its place there (returns once
  // it has, or has failed to: a host that is gone already is then found as below), then watches
  // the connection and reports the host when it is gone.
  static asio::awaitable<std::unique_ptr<RoundLink>> hold(LinkTarget target, LinkLoss on_lost);

  // Reports nothing more. A member withdraws its lease before it closes its connections, so the
  // host does not read its leaving the round as its death. Idempotent; the destructor calls it.
  void stop();
  ~RoundLink();

  struct Host;
  struct Member;

 private:
  RoundLink() = default;
  std::shared_ptr<Host> host_;
  std::shared_ptr<Member> member_;
};

// What one connect to an agent's link store says of the agent: it accepted (the agent lives),
// refused (its port is closed: the agent is gone), or gave no answer within `timeout` (no
// evidence: a cut link or a frozen machine answers nothing).
enum class Probe { kAccepted, kRefused, kNoAnswer };
asio::awaitable<Probe> probe(const std::string& host, std::uint16_t port,
                             std::chrono::milliseconds timeout);

// Declares `node` (at `group_rank` in `header`) lost by connection, in one transaction that holds
// only while its join key is the member's (the create revision the header names), it has not
// joined the next round (a node that moved on is alive), the round's exit barrier has not passed
// and the job is not closed: puts r<N>/ev/lost/<node> ("<after_ms>") and deletes the join key.
// Then revokes the node's lease, so its other keys go too. Returns whether this call declared it
// (false: the conditions did not hold, or another node declared it first).
asio::awaitable<bool> declare_lost(std::shared_ptr<EtcdKv> client, std::string job,
                                   RoundHeader header, std::string node, int group_rank,
                                   std::chrono::milliseconds after);

}  // namespace ddp::rdzv::etcd
