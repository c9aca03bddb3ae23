#pragma once
// PrefixStore: prepends "<prefix>/" to every key of an underlying Store (not owned). Used for the
// per-attempt worker namespaces and the rendezvous' per-run keys. prefixed_key is the rule every
// prefixing view (this one, and BlockingStore::with_prefix through it) joins keys by.

#include <string_view>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

// "<prefix>/<key>"; an empty prefix leaves the key as it is.
std::string prefixed_key(std::string_view prefix, std::string_view key);

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, Store& inner);

  asio::awaitable<void> set(std::string key, Bytes value) override;
  asio::awaitable<Bytes> get(std::string key) override;
  asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override;
  asio::awaitable<Bytes> compare_set(std::string key, Bytes expected, Bytes desired) override;
  asio::awaitable<bool> check(std::vector<std::string> keys) override;
  using Store::wait;
  asio::awaitable<void> wait(std::vector<std::string> keys,
                             std::chrono::milliseconds timeout) override;
  asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                 std::chrono::milliseconds timeout) override;
  asio::awaitable<std::int64_t> num_keys() override;
  asio::awaitable<bool> delete_key(std::string key) override;
  asio::awaitable<void> append(std::string key, Bytes value) override;
  asio::awaitable<std::vector<Bytes>> multi_get(std::vector<std::string> keys) override;
  asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) override;
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) override;

 private:
  std::string key_of(const std::string& key) const;
  std::string prefix_;
  Store& inner_;
};

}  // namespace ddp::rdzv
