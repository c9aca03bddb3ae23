#pragma once
// KeyTable: the keys of a store, its 2.x queues and the parties waiting on them, with TCPStore's
// semantics and no I/O. MemoryStore and the TCP server share one; waits and 1.13 watches are
// callbacks parked on the keys they concern, called after the change that completes them (nothing
// polls). Values are shared with the replies that carry them, so a large GET copies nothing.

#include "rendezvous/store/store.hpp"
#include "rendezvous/wire/protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ddp::rdzv {

// A value as it was when shared: it never changes while held (APPEND copies a shared value
// before it extends it), and outlives its key's deletion until the last holder drops it.
using SharedValue = std::shared_ptr<const Bytes>;

class KeyTable {
 public:
  using WaiterId = std::uint64_t;
  using WatcherId = std::uint64_t;
  using WakeFn = std::function<void()>;
  using WatchFn = std::function<void(wire::WatchResponse type, const std::string& key,
                                     const Bytes& old_value, const Bytes& new_value)>;

  // What makes a key present for contains_all() and wait(). kTable: it is in the table (the
  // in-process users). kTableOrQueue: it is in the table or its 2.x queue is non-empty (the TCP
  // server's CHECK and WAIT, as PyTorch's libuv server).
  enum class Presence { kTable, kTableOrQueue };

  // nullptr when key is missing. Valid until the next change of the table.
  const Bytes* find(const std::string& key) const;
  // The value at key without copying it; nullptr when key is missing.
  SharedValue share(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  bool contains_all(const std::vector<std::string>& keys,
                    Presence presence = Presence::kTable) const;
  // Keys of the table (never queues).
  std::size_t size() const { return values_.size(); }
  // Calls fn(const std::string&) on every key of the table (not the queues), in no set order.
  template <typename Fn>
  void for_each_key(Fn fn) const {
    for (const auto& entry : values_) fn(entry.first);
  }

  void set(const std::string& key, Bytes value);
  // Adds delta to the decimal integer at key (missing = 0), stores it as decimal text and
  // returns it. Throws ddp::Error naming the key when the value is not an integer or overflows.
  std::int64_t add(const std::string& key, std::int64_t delta);
  // TCPStore compare_set (see Store::compare_set). Creating a key wakes its waiters.
  Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired);
  // Returns whether key existed.
  bool erase(const std::string& key);
  // Appends in place (amortised linear in the bytes appended; a value held by a reply is copied
  // first). Creates a missing key. Size limits are the caller's (ServerSession).
  void append(const std::string& key, Bytes value);

  // 2.x BARRIER: adds one to the decimal counter at key (missing = 0). When the count reaches
  // world_size, wakes every waiter on key and returns nullopt; before, parks `wake` on key until
  // then (cancel_wait drops it; the count stays). Throws ddp::Error as add() does.
  std::optional<WaiterId> barrier(const std::string& key, std::int64_t world_size, WakeFn wake);

  // 2.x queues: FIFO lists of values by name, apart from the table (GET, GETNUMKEYS, LIST_KEYS
  // and DELETE_KEY never see them). A push wakes one waiter on the key: the first, in
  // registration order, for which it was the last missing key (those before it count the key as
  // present from then on). Size limits are the caller's (the parser's value limit).
  void queue_push(const std::string& key, Bytes value);
  struct Popped {
    std::size_t length = 0;  // before the pop; 0: nothing was popped
    SharedValue value;
  };
  Popped queue_pop(const std::string& key);
  std::size_t queue_length(const std::string& key) const;
  // Values held in all queues.
  std::size_t queued_value_count() const { return queued_values_; }

  // Calls wake once every key is present (only keys missing from the table are awaited, as
  // PyTorch's servers do). Returns nullopt, without calling wake, when they all are already.
  std::optional<WaiterId> wait(const std::vector<std::string>& keys, WakeFn wake,
                               Presence presence = Presence::kTable);
  // Forgets a wait; a no-op once it has woken.
  void cancel_wait(WaiterId id);
  std::size_t waiter_count() const { return waiters_.size(); }
  bool has_waiters(const std::string& key) const { return waiting_on_.contains(key); }
  // Called with a wait's keys when cancel_wait drops it before it woke: its connection closed
  // or its client gave up (KeyLeases). One observer; nullptr clears it.
  using DropFn = std::function<void(const std::vector<std::string>& keys)>;
  void set_drop_observer(DropFn fn) { on_drop_ = std::move(fn); }

  // Calls fn on every later change of key (1.13 WATCH_KEY) until unwatch.
  WatcherId watch(const std::string& key, WatchFn fn);
  void unwatch(WatcherId id);

 private:
  struct Waiter {
    std::size_t missing = 0;
    std::vector<std::string> keys;  // the keys it was parked on
    WakeFn wake;
  };
  struct Watcher {
    std::string key;
    WatchFn fn;
  };

  // Stores value at key, then (if `wake`) wakes its waiters (those parked on a missing key, or a
  // BARRIER's on its counter), and notifies its watchers.
  void write(const std::string& key, Bytes value, bool wake = true);
  // The decimal integer at key (missing = 0) plus delta; throws naming `op` and key.
  std::int64_t counter_plus(const char* op, const std::string& key, std::int64_t delta) const;
  WaiterId park(std::vector<std::string> keys, WakeFn wake);
  void wake_waiters_of(const std::string& key);
  bool has_barrier_waiters(const std::string& key) const;
  void wake_one_waiter_of(const std::string& key);
  void notify_watchers(wire::WatchResponse type, const std::string& key, const Bytes& old_value,
                       const Bytes& new_value);

  std::unordered_map<std::string, std::shared_ptr<Bytes>> values_;
  // Only non-empty queues are kept: popping or asking about unknown names costs nothing.
  std::unordered_map<std::string, std::deque<SharedValue>> queues_;
  std::size_t queued_values_ = 0;
  std::unordered_map<WaiterId, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<WaiterId>> waiting_on_;
  std::unordered_set<std::string> barrier_keys_;  // existing keys with BARRIER waiters parked
  std::unordered_map<WatcherId, Watcher> watchers_;
  std::unordered_map<std::string, std::vector<WatcherId>> watched_;
  std::uint64_t next_id_ = 1;
  DropFn on_drop_;
};

}  // namespace ddp::rdzv
