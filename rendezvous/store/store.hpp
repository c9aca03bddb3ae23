#pragma once
// Store: the asynchronous key-value interface with PyTorch TCPStore semantics that agents,
// rendezvous and (through BlockingStore) workers use. Implementations: MemoryStore (in-process,
// shared with the TCP server), TcpStoreClient (the wire protocol), PrefixStore (a key prefix).
//
// Keys are passed exactly as they appear on the wire: no implicit "/" is added (PyTorch's Python
// client adds one; our callers choose their keys). Every operation runs on the executor of the
// io_context that owns the store; implementations are not thread-safe.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/bytes.hpp"

namespace ddp::rdzv {

namespace asio = boost::asio;

class Store {
 public:
  virtual ~Store() = default;

  // Sets key to value and wakes every waiter on it.
  virtual asio::awaitable<void> set(std::string key, Bytes value) = 0;

  // Waits (up to timeout()) until key exists, then returns its value. Throws TimeoutError naming
  // the key and the wait.
  virtual asio::awaitable<Bytes> get(std::string key) = 0;

  // Adds delta to the decimal integer stored at key (a missing key counts as 0), stores the
  // result as decimal text and returns it. Throws Error when the stored value is not an integer.
  virtual asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) = 0;

  // TCPStore compare_set: missing key and empty expected -> stores desired, returns desired;
  // missing key and non-empty expected -> returns expected; current == expected -> stores desired,
  // returns desired; otherwise returns the current value.
  virtual asio::awaitable<Bytes> compare_set(std::string key, Bytes expected, Bytes desired) = 0;

  // True when every key exists (no waiting).
  virtual asio::awaitable<bool> check(std::vector<std::string> keys) = 0;

  // Waits until every key exists. Throws TimeoutError naming the missing keys after `timeout`.
  virtual asio::awaitable<void> wait(std::vector<std::string> keys,
                                     std::chrono::milliseconds timeout) = 0;

  // Waits until every key exists (true) or `timeout` passes (false): for callers to whom a
  // timeout is an answer, such as a poll that wakes up to do something else.
  virtual asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                         std::chrono::milliseconds timeout) = 0;
  asio::awaitable<void> wait(std::vector<std::string> keys) {
    return wait(std::move(keys), timeout_);
  }

  // Number of keys in the store (all prefixes).
  virtual asio::awaitable<std::int64_t> num_keys() = 0;

  // Deletes key; returns whether it existed.
  virtual asio::awaitable<bool> delete_key(std::string key) = 0;

  // Appends value to key's bytes (creating the key) and wakes its waiters.
  virtual asio::awaitable<void> append(std::string key, Bytes value) = 0;

  // Waits (up to timeout()) for every key, then returns their values in order. The default
  // waits, then calls multi_get_existing.
  virtual asio::awaitable<std::vector<Bytes>> multi_get(std::vector<std::string> keys) {
    co_await wait(keys, timeout_);
    co_return co_await multi_get_existing(std::move(keys));
  }

  // Sets every pair, in order. The default sets them one by one.
  virtual asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) {
    for (auto& [key, value] : kvs) co_await set(std::move(key), std::move(value));
  }

  // multi_get for keys the caller knows exist (it waited for them, or for a key written after
  // them): one request, no wait. REQUIRES every key to exist: PyTorch's servers close the
  // connection on a missing key (ddp-store answers an empty value).
  virtual asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) = 0;
  // The value of one key the caller knows exists (multi_get_existing): one request, where get()
  // is a WAIT and a GET.
  asio::awaitable<Bytes> get_existing(std::string key) {
    std::vector<std::string> keys;
    keys.push_back(std::move(key));
    std::vector<Bytes> values = co_await multi_get_existing(std::move(keys));
    co_return std::move(values.at(0));
  }

  // The default deadline of get, wait and multi_get (and of every client call).
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

 private:
  std::chrono::milliseconds timeout_{std::chrono::seconds(300)};
};

}  // namespace ddp::rdzv
