// An etcd cluster in memory. What it keeps of etcd's semantics is what the rendezvous relies on:
// one revision per write transaction (its puts, then its reads, which see them, then its deletes),
// create and mod revisions that compares test, a lease's keys deleted in one revision when it
// ends, and watches that deliver every event from their start revision, one response per
// revision, in order. What it leaves out: compaction, members and failover, auth, and time (a
// lease expires only when the test advances the clock).

#include "tests/unit/rendezvous/etcd/memory_etcd.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <deque>

#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

using std::chrono::milliseconds;

namespace {

// Whether `key` is in [begin, end): "" end is `begin` alone, "\0" every key from `begin` on.
bool in_range(const std::string& key, const std::string& begin, const std::string& end) {
  if (end.empty()) return key == begin;
  return key >= begin && (end == std::string(1, '\0') || key < end);
}

}  // namespace

class MemoryEtcd::Watch final : public KvWatch {
 public:
  Watch(asio::any_io_executor executor, std::string key, std::string range_end, bool prev_kv)
      : key_(std::move(key)),
        range_end_(std::move(range_end)),
        prev_kv_(prev_kv),
        signal_(std::move(executor)) {}

  // The events of one revision that fall in this watch's range, as one response.
  void offer(std::int64_t revision, const std::vector<const Event*>& events) {
    if (stopped_) return;
    WatchResponse response;
    response.revision = revision;
    for (const Event* e : events) {
      if (!in_range(e->event.kv.key, key_, range_end_)) continue;
      response.events.push_back(e->event);
      if (!prev_kv_) response.events.back().prev_kv.reset();
    }
    if (response.events.empty()) return;
    queue_.push_back(std::move(response));
    signal_.cancel();
  }

  asio::awaitable<std::optional<WatchResponse>> next(Clock::time_point deadline) override {
    while (queue_.empty() && !stopped_ && Clock::now() < deadline) {
      signal_.expires_at(deadline);
      co_await signal_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (stopped_ || queue_.empty()) co_return std::nullopt;
    WatchResponse response = std::move(queue_.front());
    queue_.pop_front();
    co_return response;
  }

  void cancel() override {
    stopped_ = true;
    signal_.cancel();
  }

 private:
  std::string key_;
  std::string range_end_;
  bool prev_kv_;
  bool stopped_ = false;
  std::deque<WatchResponse> queue_;
  asio::steady_timer signal_;  // cancelled to wake next()
};

MemoryEtcd::MemoryEtcd(asio::any_io_executor executor) : executor_(std::move(executor)) {}

MemoryEtcd::~MemoryEtcd() = default;

RangeResponse MemoryEtcd::read(const RangeRequest& r) const {
  if (r.revision > revision_) {
    throw IoError(fmt::format("etcd range({}): required revision {} is a future revision (now {})",
                              r.key, r.revision, revision_));
  }
  // A read in the past replays the history up to that revision.
  std::map<std::string, KeyValue> past;
  const bool in_past = r.revision > 0 && r.revision < revision_;
  if (in_past) {
    for (const Event& e : history_) {
      if (e.revision > r.revision) break;
      if (e.event.is_delete) {
        past.erase(e.event.kv.key);
      } else {
        past[e.event.kv.key] = e.event.kv;
      }
    }
  }
  const std::map<std::string, KeyValue>& source = in_past ? past : kvs_;
  std::vector<KeyValue> matched;
  for (auto it = source.lower_bound(r.key); it != source.end(); ++it) {
    if (!in_range(it->first, r.key, r.range_end)) break;  // (keys in order: none after it)
    if (r.max_create_revision > 0 && it->second.create_revision > r.max_create_revision) continue;
    matched.push_back(it->second);
  }
  if (r.sort_by_create) {
    std::stable_sort(matched.begin(), matched.end(), [](const KeyValue& a, const KeyValue& b) {
      return a.create_revision < b.create_revision;
    });
  }
  RangeResponse out;
  out.revision = revision_;
  out.count = static_cast<std::int64_t>(matched.size());
  if (!r.count_only) {
    if (r.limit > 0 && matched.size() > static_cast<std::size_t>(r.limit)) {
      matched.resize(static_cast<std::size_t>(r.limit));
    }
    out.kvs = std::move(matched);
  }
  return out;
}

bool MemoryEtcd::holds(const Compare& c) const {
  const auto it = kvs_.find(c.key);
  switch (c.target) {
    case Compare::Target::kCreate:
      return (it == kvs_.end() ? 0 : it->second.create_revision) == c.revision;
    case Compare::Target::kMod:
      return (it == kvs_.end() ? 0 : it->second.mod_revision) == c.revision;
    case Compare::Target::kValue:
      return it != kvs_.end() && it->second.value == c.value;
  }
  return false;
}

void MemoryEtcd::write_put(const PutRequest& p, std::int64_t revision) {
  KeyValue kv;
  kv.key = p.key;
  kv.value = p.value;
  kv.mod_revision = revision;
  kv.create_revision = revision;
  kv.lease = p.lease;
  std::optional<KeyValue> prev;
  if (const auto it = kvs_.find(p.key); it != kvs_.end()) {
    prev = it->second;
    kv.create_revision = prev->create_revision;
    if (prev->lease != 0 && prev->lease != p.lease) {
      if (const auto lease = leases_.find(prev->lease); lease != leases_.end()) {
        lease->second.keys.erase(p.key);
      }
    }
  }
  if (p.lease != 0) leases_.at(p.lease).keys.insert(p.key);
  kvs_[p.key] = kv;
  history_.push_back(Event{revision, WatchEvent{false, std::move(kv), std::move(prev)}});
}

void MemoryEtcd::write_delete(const std::string& key, std::int64_t revision) {
  const auto it = kvs_.find(key);
  if (it == kvs_.end()) return;
  KeyValue prev = std::move(it->second);
  kvs_.erase(it);
  if (prev.lease != 0) {
    if (const auto lease = leases_.find(prev.lease); lease != leases_.end()) {
      lease->second.keys.erase(key);
    }
  }
  KeyValue gone;
  gone.key = key;
  gone.mod_revision = revision;
  history_.push_back(Event{revision, WatchEvent{true, std::move(gone), std::move(prev)}});
}

void MemoryEtcd::publish(std::int64_t revision) {
  std::vector<const Event*> events;
  for (auto it = history_.rbegin(); it != history_.rend() && it->revision == revision; ++it) {
    events.insert(events.begin(), &*it);
  }
  std::erase_if(watches_, [](const std::weak_ptr<Watch>& w) { return w.expired(); });
  // (A copy: a watcher woken here runs later, but keep the list stable all the same.)
  const std::vector<std::weak_ptr<Watch>> watches = watches_;
  for (const auto& weak : watches) {
    if (const auto watch = weak.lock()) watch->offer(revision, events);
  }
}

asio::awaitable<RangeResponse> MemoryEtcd::range(RangeRequest request) {
  co_return read(request);
}

asio::awaitable<std::int64_t> MemoryEtcd::put(PutRequest request) {
  TxnRequest one;
  one.success.push_back(std::move(request));
  const TxnResponse result = co_await txn(std::move(one), "put");
  co_return result.revision;
}

asio::awaitable<TxnResponse> MemoryEtcd::txn(TxnRequest request, std::string what) {
  TxnResponse out;
  out.succeeded = std::all_of(request.compare.begin(), request.compare.end(),
                              [this](const Compare& c) { return holds(c); });
  if (!out.succeeded) {
    for (const RangeRequest& r : request.failure) out.ranges.push_back(read(r));
    out.revision = revision_;
    co_return out;
  }
  for (const PutRequest& p : request.success) {
    if (p.lease != 0 && leases_.count(p.lease) == 0) {
      throw IoError(fmt::format("etcd txn({}): requested lease {:x} not found", what, p.lease));
    }
  }
  const bool deletes = std::any_of(request.success_deletes.begin(), request.success_deletes.end(),
                                   [this](const std::string& key) { return kvs_.count(key) != 0; });
  const bool writes = !request.success.empty() || deletes;
  const std::int64_t revision = writes ? revision_ + 1 : revision_;
  for (const PutRequest& p : request.success) write_put(p, revision);
  revision_ = revision;
  for (const RangeRequest& r : request.success_reads) out.ranges.push_back(read(r));
  for (const std::string& key : request.success_deletes) write_delete(key, revision);
  if (writes) publish(revision);
  out.revision = revision_;
  co_return out;
}

asio::awaitable<LeaseGrant> MemoryEtcd::lease_grant(std::int64_t ttl_seconds) {
  const std::int64_t id = next_lease_++;
  const std::int64_t ttl = std::max<std::int64_t>(ttl_seconds, 1);
  leases_[id] = Lease{ttl, now_ + std::chrono::seconds(ttl), {}};
  co_return LeaseGrant{id, ttl};
}

asio::awaitable<std::int64_t> MemoryEtcd::lease_keepalive(std::int64_t id, milliseconds window,
                                                          milliseconds per_member) {
  (void)window;
  (void)per_member;
  const auto it = leases_.find(id);
  if (it == leases_.end()) co_return 0;
  it->second.expires_at = now_ + std::chrono::seconds(it->second.ttl);
  co_return it->second.ttl;
}

asio::awaitable<void> MemoryEtcd::lease_revoke(std::int64_t id, milliseconds window) {
  (void)window;
  end_lease(id);
  co_return;
}

void MemoryEtcd::end_lease(std::int64_t id) {
  const auto it = leases_.find(id);
  if (it == leases_.end()) return;
  const std::set<std::string> keys = std::move(it->second.keys);
  leases_.erase(it);
  if (keys.empty()) return;
  const std::int64_t revision = ++revision_;
  for (const std::string& key : keys) write_delete(key, revision);
  publish(revision);
}

void MemoryEtcd::advance(milliseconds by) {
  now_ += by;
  std::vector<std::int64_t> expired;
  for (const auto& [id, lease] : leases_) {
    if (lease.expires_at <= now_) expired.push_back(id);
  }
  for (const std::int64_t id : expired) end_lease(id);
}

std::shared_ptr<KvWatch> MemoryEtcd::watch(std::string key, std::string range_end,
                                           std::int64_t start_revision, bool prev_kv) {
  auto w = std::make_shared<Watch>(executor_, std::move(key), std::move(range_end), prev_kv);
  // Replay what happened since start_revision, one response per revision.
  if (start_revision > 0) {
    std::vector<const Event*> events;
    for (std::size_t i = 0; i < history_.size(); ++i) {
      if (history_[i].revision < start_revision) continue;
      events.push_back(&history_[i]);
      if (i + 1 == history_.size() || history_[i + 1].revision != history_[i].revision) {
        w->offer(history_[i].revision, events);
        events.clear();
      }
    }
  }
  watches_.push_back(w);
  return w;
}

}  // namespace ddp::rdzv::etcd
