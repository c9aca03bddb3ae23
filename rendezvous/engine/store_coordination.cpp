// Coordination over a TCPStore: each operation is the one or two requests the c10d protocol made
// for it before the engine existed, so a round costs the store what it did.

#include "rendezvous/engine/store_coordination.hpp"

#include <algorithm>

namespace ddp::rdzv {

asio::awaitable<std::int64_t> StoreCoordination::arrive(std::string tally, std::string node) {
  (void)node;
  co_return co_await store_.add(std::move(tally), 1);
}

asio::awaitable<std::int64_t> StoreCoordination::count(std::string tally) {
  co_return co_await store_.add(std::move(tally), 0);
}

asio::awaitable<Bytes> StoreCoordination::create(std::string key, Bytes value) {
  co_return co_await store_.compare_set(std::move(key), {}, std::move(value));
}

asio::awaitable<std::vector<std::optional<Bytes>>> StoreCoordination::get(
    std::vector<std::string> keys) {
  std::vector<char> exists(keys.size(), 0);
  co_return co_await get_existing_keys(store_, keys, exists);
}

asio::awaitable<void> StoreCoordination::put(std::vector<std::pair<std::string, Bytes>> kvs) {
  co_await store_.multi_set(std::move(kvs));
}

asio::awaitable<bool> StoreCoordination::wait_for(std::string key,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::string> one(1, std::move(key));
  co_return co_await store_.wait_for(std::move(one), timeout);
}

asio::awaitable<std::vector<std::optional<Bytes>>> get_existing_keys(
    Store& store, const std::vector<std::string>& keys, std::vector<char>& exists) {
  if (std::find(exists.begin(), exists.end(), 0) != exists.end()) {
    const bool all_exist = co_await store.check(keys);
    if (all_exist) {
      std::fill(exists.begin(), exists.end(), 1);
    } else {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        if (exists[i]) continue;
        std::vector<std::string> one(1, keys[i]);
        const bool exists_one = co_await store.check(std::move(one));
        exists[i] = exists_one ? 1 : 0;
      }
    }
  }
  std::vector<std::string> present;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (exists[i]) present.push_back(keys[i]);
  }
  std::vector<Bytes> values;
  if (!present.empty()) values = co_await store.multi_get_existing(std::move(present));
  std::vector<std::optional<Bytes>> out(keys.size());
  for (std::size_t i = 0, at = 0; i < keys.size(); ++i) {
    if (exists[i]) out[i] = std::move(values.at(at++));
  }
  co_return out;
}

}  // namespace ddp::rdzv
