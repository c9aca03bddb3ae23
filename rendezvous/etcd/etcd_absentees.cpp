// Why one refused connect is enough: every etcd agent serves its link store for its whole life
// (etcd_links.hpp), and a refused connect is the kernel saying that nothing listens on the port,
// so a member of the last round whose link store refuses has no agent any more. (A member
// watching a live round waits a grace of refusals, because a round's host is found by a link
// that closed for other reasons too; an absentee is only asked once it failed to join.) The read
// is one transaction of O(members) keys, made only while the forming round misses members it
// expects.

#include "rendezvous/etcd/etcd_absentees.hpp"

#include <set>
#include <vector>

#include "ddp/error.hpp"
#include "rendezvous/engine/rdzv_log.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/etcd/etcd_links.hpp"

namespace ddp::rdzv::etcd {

namespace {

struct Absentee {
  std::string name;
  int group_rank = 0;
  std::string addr;
  std::uint16_t link_port = 0;
};

RangeRequest prefix_range(const std::string& prefix) {
  RangeRequest r;
  r.key = prefix;
  r.range_end = prefix_end(prefix);
  return r;
}

asio::awaitable<std::vector<Absentee>> read_absentees(EtcdKv& client, const std::string& job,
                                                      const RoundHeader& previous) {
  const std::string before = keys::joins(job, previous.round);
  const std::string next = keys::joins(job, previous.round + 1);
  TxnRequest read;  // both rounds' join keys in one revision
  read.success_reads.push_back(prefix_range(before));
  read.success_reads.push_back(prefix_range(next));
  const TxnResponse state = co_await client.txn(std::move(read), "read the absentees of " + next);
  if (state.ranges.size() != 2) throw IoError("etcd txn(read absentees): short response");
  std::set<std::string> joined;
  for (const KeyValue& kv : state.ranges[1].kvs) joined.insert(kv.key.substr(next.size()));
  std::vector<Absentee> absent;
  for (const KeyValue& kv : state.ranges[0].kvs) {
    const std::string name = kv.key.substr(before.size());
    const std::optional<int> group_rank = group_rank_of(previous, kv.create_revision);
    if (!group_rank || joined.count(name) != 0) continue;  // not a member, or moved on
    const NodeDesc desc = decode_node_desc(kv.value, kv.key);
    if (desc.link_port == 0) continue;  // no link store to ask
    absent.push_back(Absentee{name, *group_rank, desc.addr, desc.link_port});
  }
  co_return absent;
}

asio::awaitable<std::vector<Absentee>> refusing(std::vector<Absentee> absent,
                                                std::chrono::milliseconds timeout) {
  std::vector<Absentee> gone;
  for (Absentee& a : absent) {
    const Probe answer = co_await probe(a.addr, a.link_port, timeout);
    if (answer == Probe::kRefused) gone.push_back(std::move(a));
  }
  co_return gone;
}

}  // namespace

asio::awaitable<Absentees> declare_dead_absentees(std::shared_ptr<EtcdKv> client, std::string job,
                                                  RoundHeader previous,
                                                  std::chrono::milliseconds grace) {
  std::vector<Absentee> absent = co_await read_absentees(*client, job, previous);
  Absentees result{static_cast<int>(absent.size()), 0};
  const std::vector<Absentee> gone = co_await refusing(std::move(absent), grace);
  for (const Absentee& a : gone) {
    logger()->info("round {}: node {} has not joined round {} and its agent's link store at {}:{} "
                   "refuses connections",
                   previous.round, a.name, previous.round + 1, a.addr, a.link_port);
    const bool declared = co_await declare_lost(client, job, previous, a.name, a.group_rank, grace);
    if (declared) ++result.declared;
  }
  co_return result;
}

}  // namespace ddp::rdzv::etcd
