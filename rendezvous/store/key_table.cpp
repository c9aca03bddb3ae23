// KeyTable: a hash map of shared values plus two indexes (waiters and watchers by key). Callbacks
// run after the table has changed, so a callback may read or change the table again.

#include "rendezvous/store/key_table.hpp"

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace ddp::rdzv {

const Bytes* KeyTable::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : it->second.get();
}

SharedValue KeyTable::share(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : SharedValue(it->second);
}

bool KeyTable::contains_all(const std::vector<std::string>& keys, Presence presence) const {
  return std::all_of(keys.begin(), keys.end(), [&](const auto& key) {
    return contains(key) || (presence == Presence::kTableOrQueue && queues_.contains(key));
  });
}

void KeyTable::write(const std::string& key, Bytes value, bool wake) {
  auto [it, created] = values_.try_emplace(key);
  // The old value is dropped when this returns (a reply that shares it keeps its own reference).
  const std::shared_ptr<Bytes> old_value =
      std::exchange(it->second, std::make_shared<Bytes>(std::move(value)));
  // Waiters are parked on missing keys, and on a BARRIER's counter: a write of an existing key
  // wakes the latter, as PyTorch's servers wake on every write. (Most writes, heartbeats, are of
  // existing keys with neither barrier waiters nor watchers, which only a PyTorch 1.13 client
  // asks for: they skip both lookups; the watchers' was 2 % of a store serving 20,000 heartbeats
  // a second.)
  wake = wake && (created || has_barrier_waiters(key));
  const bool watched = !watched_.empty() && watched_.count(key) != 0;
  if (!watched) {
    if (wake) wake_waiters_of(key);
    return;
  }
  // Copy before any callback runs: a callback may change the table and invalidate `it`.
  const Bytes new_value = *it->second;
  if (wake) wake_waiters_of(key);
  notify_watchers(created ? wire::WatchResponse::kKeyCreated : wire::WatchResponse::kKeyUpdated,
                  key, old_value ? *old_value : Bytes{}, new_value);
}

void KeyTable::set(const std::string& key, Bytes value) { write(key, std::move(value)); }

std::int64_t KeyTable::counter_plus(const char* op, const std::string& key,
                                    std::int64_t delta) const {
  std::int64_t current = 0;
  if (const Bytes* value = find(key)) {
    const std::optional<std::int64_t> parsed = parse_number<std::int64_t>(
        std::string_view(reinterpret_cast<const char*>(value->data()), value->size()));
    if (!parsed) {
      throw Error(fmt::format("{}({}): the stored value is not a decimal integer", op, key));
    }
    current = *parsed;
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    throw Error(fmt::format("{}({}): {} + {} overflows a 64-bit integer", op, key, current, delta));
  }
  return result;
}

std::int64_t KeyTable::add(const std::string& key, std::int64_t delta) {
  const std::int64_t result = counter_plus("add", key, delta);
  write(key, to_bytes(std::to_string(result)));
  return result;
}

std::optional<KeyTable::WaiterId> KeyTable::barrier(const std::string& key, std::int64_t world_size,
                                                    WakeFn wake) {
  const std::int64_t count = counter_plus("barrier", key, 1);
  // The arrivals before the last do not wake anybody, not even a WAIT on the counter's key
  // (PyTorch's server wakes nobody either until the count is reached).
  const bool complete = count >= world_size;
  write(key, to_bytes(std::to_string(count)), complete);
  if (complete) return std::nullopt;
  barrier_keys_.insert(key);
  return park({key}, std::move(wake));
}

bool KeyTable::has_barrier_waiters(const std::string& key) const {
  return !barrier_keys_.empty() && barrier_keys_.contains(key);
}

Bytes KeyTable::compare_set(const std::string& key, const Bytes& expected, Bytes desired) {
  const Bytes* current = find(key);
  if (current == nullptr) {
    if (!expected.empty()) return expected;
  } else if (*current != expected) {
    return *current;
  }
  Bytes result = desired;
  write(key, std::move(desired));
  return result;
}

bool KeyTable::erase(const std::string& key) {
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  const std::shared_ptr<Bytes> old_value = std::move(it->second);
  values_.erase(it);
  notify_watchers(wire::WatchResponse::kKeyDeleted, key, *old_value, Bytes{});
  return true;
}

void KeyTable::append(const std::string& key, Bytes value) {
  auto it = values_.find(key);
  if (it == values_.end()) {
    write(key, std::move(value));
    return;
  }
  std::shared_ptr<Bytes>& current = it->second;
  const bool watched = !watched_.empty() && watched_.count(key) != 0;
  const Bytes old_value = watched ? *current : Bytes{};
  if (current.use_count() > 1) {
    // A reply still writes this value out: extend a copy, never the bytes it is sending.
    auto copy = std::make_shared<Bytes>();
    copy->reserve(2 * (current->size() + value.size()));
    copy->insert(copy->end(), current->begin(), current->end());
    current = std::move(copy);
  }
  // vector growth doubles the capacity: n appends cost O(total bytes), not O(n * size).
  current->insert(current->end(), value.begin(), value.end());
  if (has_barrier_waiters(key)) wake_waiters_of(key);  // the only waiters on an existing key
  if (!watched) return;
  const Bytes new_value = *current;
  notify_watchers(wire::WatchResponse::kKeyUpdated, key, old_value, new_value);
}

void KeyTable::queue_push(const std::string& key, Bytes value) {
  queues_[key].push_back(std::make_shared<const Bytes>(std::move(value)));
  ++queued_values_;
  wake_one_waiter_of(key);
}

KeyTable::Popped KeyTable::queue_pop(const std::string& key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return {};
  auto& queue = it->second;
  Popped popped{queue.size(), std::move(queue.front())};
  queue.pop_front();
  --queued_values_;
  if (queue.empty()) queues_.erase(it);  // an empty deque still holds a block
  return popped;
}

std::size_t KeyTable::queue_length(const std::string& key) const {
  auto it = queues_.find(key);
  return it == queues_.end() ? 0 : it->second.size();
}

std::optional<KeyTable::WaiterId> KeyTable::wait(const std::vector<std::string>& keys, WakeFn wake,
                                                 Presence presence) {
  if (contains_all(keys, presence)) return std::nullopt;
  // A key whose queue is non-empty is still awaited when another key is missing: like PyTorch's
  // libuv server, a wait parks on every key absent from the table.
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!contains(key)) missing.push_back(key);
  }
  return park(std::move(missing), std::move(wake));
}

KeyTable::WaiterId KeyTable::park(std::vector<std::string> keys, WakeFn wake) {
  const WaiterId id = next_id_++;
  for (const auto& key : keys) waiting_on_[key].push_back(id);
  Waiter waiter;
  waiter.missing = keys.size();
  waiter.keys = std::move(keys);
  waiter.wake = std::move(wake);
  waiters_.emplace(id, std::move(waiter));
  return id;
}

void KeyTable::cancel_wait(WaiterId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (const auto& key : it->second.keys) {
    auto list = waiting_on_.find(key);
    if (list == waiting_on_.end()) continue;
    std::erase(list->second, id);  // every place: a wait may name a key twice
    if (list->second.empty()) {
      waiting_on_.erase(list);
      barrier_keys_.erase(key);
    }
  }
  const std::vector<std::string> keys = std::move(it->second.keys);
  waiters_.erase(it);
  if (on_drop_) on_drop_(keys);
}

void KeyTable::wake_waiters_of(const std::string& key) {
  auto list = waiting_on_.find(key);
  if (list == waiting_on_.end()) return;
  std::vector<WaiterId> ids = std::move(list->second);
  waiting_on_.erase(list);
  if (!barrier_keys_.empty()) barrier_keys_.erase(key);
  std::vector<WakeFn> ready;
  for (WaiterId id : ids) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    if (--it->second.missing == 0) {
      ready.push_back(std::move(it->second.wake));
      waiters_.erase(it);
    }
  }
  for (auto& wake : ready) wake();
}

void KeyTable::wake_one_waiter_of(const std::string& key) {
  auto list = waiting_on_.find(key);
  if (list == waiting_on_.end()) return;
  // Each waiter passed counts the key as present (PyTorch's server decrements them too); unlike
  // PyTorch's, it also leaves the key's list, so a later write of the key cannot count it twice.
  std::vector<WaiterId>& ids = list->second;
  WakeFn ready;
  std::size_t passed = 0;
  while (passed < ids.size() && !ready) {
    auto it = waiters_.find(ids[passed++]);
    if (it == waiters_.end()) continue;
    if (--it->second.missing == 0) {
      ready = std::move(it->second.wake);
      waiters_.erase(it);
    }
  }
  ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(passed));
  if (ids.empty()) waiting_on_.erase(list);
  if (ready) ready();
}

KeyTable::WatcherId KeyTable::watch(const std::string& key, WatchFn fn) {
  const WatcherId id = next_id_++;
  watched_[key].push_back(id);
  watchers_.emplace(id, Watcher{key, std::move(fn)});
  return id;
}

void KeyTable::unwatch(WatcherId id) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto list = watched_.find(it->second.key);
  if (list != watched_.end()) {
    std::erase(list->second, id);
    if (list->second.empty()) watched_.erase(list);
  }
  watchers_.erase(it);
}

void KeyTable::notify_watchers(wire::WatchResponse type, const std::string& key,
                               const Bytes& old_value, const Bytes& new_value) {
  auto list = watched_.find(key);
  if (list == watched_.end()) return;
  const std::vector<WatcherId> ids = list->second;  // a callback may unwatch
  for (WatcherId id : ids) {
    auto it = watchers_.find(id);
    if (it != watchers_.end()) it->second.fn(type, key, old_value, new_value);
  }
}

}  // namespace ddp::rdzv
