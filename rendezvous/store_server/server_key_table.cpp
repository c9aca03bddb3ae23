// KeyTable: a hash map of shared values plus two indexes (waiters and watchers by key). Callbacks
// run after the table has changed, so a callback may read or change the table again.

#include "rendezvous/store_server/server_key_table.hpp"

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

namespace ddp::rdzv {
namespace {

void remove_one(std::vector<std::uint64_t>& ids, std::uint64_t id) {
  auto it = std::find(ids.begin(), ids.end(), id);
  if (it != ids.end()) ids.erase(it);
}

}  // namespace

const Bytes* KeyTable::find(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : it->second.get();
}

SharedValue KeyTable::share(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : SharedValue(it->second);
}

bool KeyTable::contains_all(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [this](const auto& key) { return contains(key); });
}

void KeyTable::write(const std::string& key, Bytes value) {
  auto [it, created] = values_.try_emplace(key);
  // The old value is dropped when this returns (a reply that shares it keeps its own reference).
  const std::shared_ptr<Bytes> old_value =
      std::exchange(it->second, std::make_shared<Bytes>(std::move(value)));
  // (No store has a watcher unless a PyTorch 1.13 client asked for one: most writes, heartbeats,
  // skip the lookup; it was 2 % of a store serving 20,000 heartbeats a second.)
  const bool watched = !watched_.empty() && watched_.count(key) != 0;
  if (!watched) {
    if (created) wake_waiters_of(key);
    return;
  }
  // Copy before any callback runs: a callback may change the table and invalidate `it`.
  const Bytes new_value = *it->second;
  if (created) wake_waiters_of(key);
  notify_watchers(created ? wire::WatchResponse::kKeyCreated : wire::WatchResponse::kKeyUpdated,
                  key, old_value ? *old_value : Bytes{}, new_value);
}

void KeyTable::set(const std::string& key, Bytes value) { write(key, std::move(value)); }

std::int64_t KeyTable::add(const std::string& key, std::int64_t delta) {
  std::int64_t current = 0;
  if (const Bytes* value = find(key)) {
    const std::optional<std::int64_t> parsed = parse_number<std::int64_t>(
        std::string_view(reinterpret_cast<const char*>(value->data()), value->size()));
    if (!parsed) {
      throw Error(fmt::format("add({}): the stored value is not a decimal integer", key));
    }
    current = *parsed;
  }
  std::int64_t result = 0;
  if (__builtin_add_overflow(current, delta, &result)) {
    throw Error(fmt::format("add({}): {} + {} overflows a 64-bit integer", key, current, delta));
  }
  write(key, to_bytes(std::to_string(result)));
  return result;
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
  if (!watched) return;
  const Bytes new_value = *current;
  notify_watchers(wire::WatchResponse::kKeyUpdated, key, old_value, new_value);
}

std::optional<KeyTable::WaiterId> KeyTable::wait(const std::vector<std::string>& keys,
                                                 WakeFn wake) {
  Waiter waiter;
  for (const auto& key : keys) {
    if (!contains(key)) waiter.keys.push_back(key);
  }
  if (waiter.keys.empty()) return std::nullopt;
  const WaiterId id = next_id_++;
  waiter.missing = waiter.keys.size();
  waiter.wake = std::move(wake);
  for (const auto& key : waiter.keys) waiting_on_[key].push_back(id);
  waiters_.emplace(id, std::move(waiter));
  return id;
}

void KeyTable::cancel_wait(WaiterId id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (const auto& key : it->second.keys) {
    auto list = waiting_on_.find(key);
    if (list == waiting_on_.end()) continue;
    remove_one(list->second, id);
    if (list->second.empty()) waiting_on_.erase(list);
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
    remove_one(list->second, id);
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
