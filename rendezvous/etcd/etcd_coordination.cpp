// Coordination over etcd. A tally is a prefix of one key per node rather than a counter: a
// counter would be a compare-and-swap that every node retries (quadratic at 1,024 nodes), where
// a put and a count in one transaction cost each node one request and see every arrival before
// it. Arrivals are bound to the node's lease, so a lost node's arrival goes with it.

#include "rendezvous/etcd/etcd_coordination.hpp"

#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

asio::awaitable<std::int64_t> EtcdCoordination::arrive(std::string tally, std::string node) {
  TxnRequest txn;
  txn.success.push_back({tally + node, "1", lease_ ? lease_() : 0});
  txn.success_reads.push_back(prefix_count(tally));
  const TxnResponse counted = co_await kv_.txn(std::move(txn), "arrive at " + tally + node);
  if (counted.ranges.size() != 1) throw IoError("etcd txn(arrive at " + tally + "): no count");
  co_return counted.ranges[0].count;
}

asio::awaitable<std::int64_t> EtcdCoordination::count(std::string tally) {
  co_return (co_await kv_.range(prefix_count(tally))).count;
}

asio::awaitable<Bytes> EtcdCoordination::create(std::string key, Bytes value) {
  TxnRequest txn;
  txn.compare.push_back({key, Compare::Target::kCreate, 0, {}});
  txn.success.push_back({key, to_string(value), 0});
  txn.failure.push_back(one_key(key));
  const TxnResponse result = co_await kv_.txn(std::move(txn), "create " + key);
  if (result.succeeded) co_return value;
  if (result.ranges.empty() || result.ranges[0].kvs.empty()) {
    // Created and deleted between the compare and the read: nothing stands; try again.
    co_return co_await create(std::move(key), std::move(value));
  }
  co_return to_bytes(result.ranges[0].kvs[0].value);
}

asio::awaitable<std::vector<std::optional<Bytes>>> EtcdCoordination::get(
    std::vector<std::string> keys) {
  TxnRequest txn;
  for (const std::string& key : keys) txn.success_reads.push_back(one_key(key));
  const TxnResponse result = co_await kv_.txn(std::move(txn), "get " + keys.front());
  if (result.ranges.size() != keys.size()) throw IoError("etcd txn(get " + keys.front() + "): short");
  std::vector<std::optional<Bytes>> out;
  for (const RangeResponse& r : result.ranges) {
    if (r.kvs.empty()) {
      out.emplace_back();
    } else {
      out.emplace_back(to_bytes(r.kvs[0].value));
    }
  }
  co_return out;
}

asio::awaitable<void> EtcdCoordination::put(std::vector<std::pair<std::string, Bytes>> kvs) {
  TxnRequest txn;
  for (auto& [key, value] : kvs) txn.success.push_back({key, to_string(value), 0});
  co_await kv_.txn(std::move(txn), "put " + kvs.front().first);
}

asio::awaitable<bool> EtcdCoordination::wait_for(std::string key,
                                                 std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const RangeResponse now = co_await kv_.range(one_key(key));
  if (!now.kvs.empty()) co_return true;
  // From just after the read: a put at any later revision reaches the watch.
  const std::shared_ptr<KvWatch> watch = kv_.watch(key, "", now.revision + 1, false);
  struct Cancel {
    std::shared_ptr<KvWatch> watch;
    ~Cancel() { watch->cancel(); }
  } cancel{watch};
  for (;;) {
    const auto response = co_await watch->next(deadline);
    if (!response) co_return false;
    for (const WatchEvent& event : response->events) {
      if (!event.is_delete) co_return true;
    }
  }
}

}  // namespace ddp::rdzv::etcd
