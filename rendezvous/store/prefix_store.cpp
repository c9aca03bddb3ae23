#include "rendezvous/store/prefix_store.hpp"

namespace ddp::rdzv {

PrefixStore::PrefixStore(std::string prefix, Store& inner)
    : prefix_(std::move(prefix)), inner_(inner) {
  set_timeout(inner.timeout());
}

std::string prefixed_key(std::string_view prefix, std::string_view key) {
  std::string out;
  if (prefix.empty()) return out.append(key);
  out.reserve(prefix.size() + 1 + key.size());
  return out.append(prefix).append("/").append(key);
}

// Every PrefixStore has a non-empty prefix (BlockingStore makes one only for a non-empty prefix;
// the rendezvous' prefixes start "/ddprun/"), so every key gains exactly one "/".
std::string PrefixStore::key_of(const std::string& key) const { return prefixed_key(prefix_, key); }

asio::awaitable<void> PrefixStore::set(std::string key, Bytes value) {
  co_await inner_.set(key_of(key), std::move(value));
}

asio::awaitable<Bytes> PrefixStore::get(std::string key) {
  co_return co_await inner_.get(key_of(key));
}

asio::awaitable<std::int64_t> PrefixStore::add(std::string key, std::int64_t delta) {
  co_return co_await inner_.add(key_of(key), delta);
}

asio::awaitable<Bytes> PrefixStore::compare_set(std::string key, Bytes expected, Bytes desired) {
  co_return co_await inner_.compare_set(key_of(key), std::move(expected), std::move(desired));
}

asio::awaitable<bool> PrefixStore::check(std::vector<std::string> keys) {
  for (auto& key : keys) key = key_of(key);
  co_return co_await inner_.check(std::move(keys));
}

asio::awaitable<void> PrefixStore::wait(std::vector<std::string> keys,
                                        std::chrono::milliseconds timeout) {
  for (auto& key : keys) key = key_of(key);
  co_await inner_.wait(std::move(keys), timeout);
}

asio::awaitable<bool> PrefixStore::wait_for(std::vector<std::string> keys,
                                            std::chrono::milliseconds timeout) {
  for (auto& key : keys) key = key_of(key);
  co_return co_await inner_.wait_for(std::move(keys), timeout);
}

asio::awaitable<std::int64_t> PrefixStore::num_keys() { co_return co_await inner_.num_keys(); }

asio::awaitable<bool> PrefixStore::delete_key(std::string key) {
  co_return co_await inner_.delete_key(key_of(key));
}

asio::awaitable<void> PrefixStore::append(std::string key, Bytes value) {
  co_await inner_.append(key_of(key), std::move(value));
}

asio::awaitable<std::vector<Bytes>> PrefixStore::multi_get(std::vector<std::string> keys) {
  for (auto& key : keys) key = key_of(key);
  co_return co_await inner_.multi_get(std::move(keys));
}

asio::awaitable<std::vector<Bytes>> PrefixStore::multi_get_existing(
    std::vector<std::string> keys) {
  for (auto& key : keys) key = key_of(key);
  co_return co_await inner_.multi_get_existing(std::move(keys));
}

asio::awaitable<void> PrefixStore::multi_set(std::vector<std::pair<std::string, Bytes>> kvs) {
  for (auto& kv : kvs) kv.first = key_of(kv.first);
  co_await inner_.multi_set(std::move(kvs));
}

}  // namespace ddp::rdzv
