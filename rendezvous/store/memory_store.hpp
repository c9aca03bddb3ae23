#pragma once
// MemoryStore: the in-process Store. The TCP server keeps its keys here, and single-process tests
// use it directly. Waiters are completion handlers parked on the key they wait for; nothing polls.

#include "rendezvous/store/store.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace ddp::rdzv {

class KeyTable;

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(asio::any_io_executor executor);
  ~MemoryStore() override;

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
  // A missing key reads as an empty value, as ddp-store's GET answers it.
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) override;

  // The keys and waiters themselves, for the TCP server that serves them (synchronous access).
  KeyTable& table();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ddp::rdzv
