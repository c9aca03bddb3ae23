#pragma once
// KeyTable: the keys of a store and the parties waiting on them, with TCPStore's semantics and no
// I/O. MemoryStore and the TCP server share one; waits and 1.13 watches are callbacks parked on
// the keys they concern, called after the change that completes them (nothing polls). Values are
// shared with the replies that carry them, so a large GET copies nothing.

#include "rendezvous/store/store.hpp"
#include "rendezvous/wire/protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
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

  // nullptr when key is missing. Valid until the next change of the table.
  const Bytes* find(const std::string& key) const;
  // The value at key without copying it; nullptr when key is missing.
  SharedValue share(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  bool contains_all(const std::vector<std::string>& keys) const;
  std::size_t size() const { return values_.size(); }

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

  // Calls wake once every key exists (only still-missing keys are awaited). Returns nullopt,
  // without calling wake, when they all exist already.
  std::optional<WaiterId> wait(const std::vector<std::string>& keys, WakeFn wake);
  // Forgets a wait; a no-op once it has woken.
  void cancel_wait(WaiterId id);
  std::size_t waiter_count() const { return waiters_.size(); }
  bool has_waiters(const std::string& key) const { return waiting_on_.contains(key); }
  // Called with a wait's keys when cancel_wait drops it before it woke: its connection closed
  // or its client gave up (ServerLeases). One observer; nullptr clears it.
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

  // Stores value at key, then wakes and notifies.
  void write(const std::string& key, Bytes value);
  void wake_waiters_of(const std::string& key);
  void notify_watchers(wire::WatchResponse type, const std::string& key, const Bytes& old_value,
                       const Bytes& new_value);

  std::unordered_map<std::string, std::shared_ptr<Bytes>> values_;
  std::unordered_map<WaiterId, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<WaiterId>> waiting_on_;
  std::unordered_map<WatcherId, Watcher> watchers_;
  std::unordered_map<std::string, std::vector<WatcherId>> watched_;
  std::uint64_t next_id_ = 1;
  DropFn on_drop_;
};

}  // namespace ddp::rdzv
