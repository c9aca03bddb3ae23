#pragma once
// BlockingStore: the synchronous store client for worker processes (libddp, the Gloo store
// adapter, benchmarks). It owns a private io_context and a TcpStoreClient and drives the loop
// with run_until on the calling thread: no threads of its own. Keys get the prefix given at
// connect ("" for none). Not thread-safe: one caller at a time (callers lock).

#include "rendezvous/store/store.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

#include <memory>

namespace ddp::rdzv {

class BlockingStore {
 public:
  static std::unique_ptr<BlockingStore> connect(const std::string& host, std::uint16_t port,
                                                ConnectOptions options = {},
                                                std::string prefix = "");
  ~BlockingStore();

  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key);  // waits up to timeout() for the key
  std::int64_t add(const std::string& key, std::int64_t delta);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool check(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::int64_t num_keys();
  bool delete_key(const std::string& key);
  void append(const std::string& key, const Bytes& value);
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys);
  void multi_set(const std::vector<std::pair<std::string, Bytes>>& kvs);

  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);
  const std::string& address() const;  // "host:port"
  const std::string& prefix() const;

 private:
  struct Impl;
  explicit BlockingStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::rdzv
