// Coordination over a TCPStore: each operation is the one or two requests the c10d protocol made
// for it before the engine existed, so a round costs the store what it did.

#include "rendezvous/engine/store_coordination.hpp"

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
  // PyTorch's servers close the connection on a MULTI_GET of a missing key: check first, and
  // read only the keys that exist.
  std::vector<char> exists(keys.size(), 1);
  const bool all_exist = co_await store_.check(keys);
  if (!all_exist) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::vector<std::string> one(1, keys[i]);
      const bool exists_one = co_await store_.check(std::move(one));
      exists[i] = exists_one ? 1 : 0;
    }
  }
  std::vector<std::string> present;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (exists[i]) present.push_back(keys[i]);
  }
  std::vector<Bytes> values;
  if (!present.empty()) values = co_await store_.multi_get_existing(std::move(present));
  std::vector<std::optional<Bytes>> out(keys.size());
  for (std::size_t i = 0, at = 0; i < keys.size(); ++i) {
    if (exists[i]) out[i] = std::move(values.at(at++));
  }
  co_return out;
}

asio::awaitable<void> StoreCoordination::put(std::vector<std::pair<std::string, Bytes>> kvs) {
  co_await store_.multi_set(std::move(kvs));
}

asio::awaitable<bool> StoreCoordination::wait_for(std::string key,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::string> one(1, std::move(key));
  co_return co_await store_.wait_for(std::move(one), timeout);
}

}  // namespace ddp::rdzv
