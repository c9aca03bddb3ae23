#pragma once
// PrefixStore: prepends "<prefix>/" to every key of an underlying Store (not owned). Used for the
// per-attempt worker namespaces and the rendezvous' per-run keys. prefixed_key is the rule every
// prefixing view (this one, and BlockingStore::with_prefix through it) joins keys by.

#include <string_view>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

// "<prefix>/<key>"; an empty prefix leaves the key as it is.
std::string prefixed_key(std::string_view prefix, std::string_view key);

// Each call is the inner store's call on the prefixed keys (num_keys counts every prefix).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner);

  asio::awaitable<void> set(std::string key, Bytes value) override {
    return inner_.set(key_of(key), std::move(value));
  }
  asio::awaitable<Bytes> get(std::string key) override { return inner_.get(key_of(key)); }
  asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override {
    return inner_.add(key_of(key), delta);
  }
  asio::awaitable<Bytes> compare_set(std::string key, Bytes expected, Bytes desired) override {
    return inner_.compare_set(key_of(key), std::move(expected), std::move(desired));
  }
  asio::awaitable<bool> check(std::vector<std::string> keys) override {
    return inner_.check(keys_of(std::move(keys)));
  }
  using Store::wait;
  asio::awaitable<void> wait(std::vector<std::string> keys,
                             std::chrono::milliseconds timeout) override {
    return inner_.wait(keys_of(std::move(keys)), timeout);
  }
  asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                 std::chrono::milliseconds timeout) override {
    return inner_.wait_for(keys_of(std::move(keys)), timeout);
  }
  asio::awaitable<std::int64_t> num_keys() override { return inner_.num_keys(); }
  asio::awaitable<bool> delete_key(std::string key) override {
    return inner_.delete_key(key_of(key));
  }
  asio::awaitable<void> append(std::string key, Bytes value) override {
    return inner_.append(key_of(key), std::move(value));
  }
  asio::awaitable<std::vector<Bytes>> multi_get(std::vector<std::string> keys) override {
    return inner_.multi_get(keys_of(std::move(keys)));
  }
  asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) override;
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) override {
    return inner_.multi_get_existing(keys_of(std::move(keys)));
  }

 private:
  std::string key_of(const std::string& key) const { return prefixed_key(prefix_, key); }
  std::vector<std::string> keys_of(std::vector<std::string> keys) const;
  std::string prefix_;
  Store& inner_;
};

}  // namespace ddp::rdzv
