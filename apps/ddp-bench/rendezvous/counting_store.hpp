#pragma once
// CountingStore: a Store decorator that counts the TCPStore requests and bytes that one member's
// calls put on the wire, as TcpStoreClient sends them in the 2.x dialect (a get is WAIT + GET, a
// wait that times out adds CANCEL_WAIT). The store server keeps no counters, so the rendezvous
// simulation counts here and sums over its members. Not thread-safe (one io_context).

#include <cstdint>

#include "rendezvous/store/store.hpp"

namespace ddp::bench {

namespace rdzv = ddp::rdzv;

struct WireCounts {
  std::int64_t requests = 0;
  std::int64_t request_bytes = 0;  // client to store
  std::int64_t reply_bytes = 0;    // store to client
  WireCounts& operator+=(const WireCounts& o);
  friend WireCounts operator-(WireCounts a, const WireCounts& b);
};

class CountingStore final : public rdzv::Store {
 public:
  // `inner` and `counts` must outlive this store.
  CountingStore(rdzv::Store& inner, WireCounts& counts);

  rdzv::asio::awaitable<void> set(std::string key, rdzv::Bytes value) override;
  rdzv::asio::awaitable<rdzv::Bytes> get(std::string key) override;
  rdzv::asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override;
  rdzv::asio::awaitable<rdzv::Bytes> compare_set(std::string key, rdzv::Bytes expected,
                                                 rdzv::Bytes desired) override;
  rdzv::asio::awaitable<bool> check(std::vector<std::string> keys) override;
  using Store::wait;
  rdzv::asio::awaitable<void> wait(std::vector<std::string> keys,
                                   std::chrono::milliseconds timeout) override;
  rdzv::asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                       std::chrono::milliseconds timeout) override;
  rdzv::asio::awaitable<std::int64_t> num_keys() override;
  rdzv::asio::awaitable<bool> delete_key(std::string key) override;
  rdzv::asio::awaitable<void> append(std::string key, rdzv::Bytes value) override;
  rdzv::asio::awaitable<std::vector<rdzv::Bytes>> multi_get(
      std::vector<std::string> keys) override;
  rdzv::asio::awaitable<void> multi_set(
      std::vector<std::pair<std::string, rdzv::Bytes>> kvs) override;
  rdzv::asio::awaitable<std::vector<rdzv::Bytes>> multi_get_existing(
      std::vector<std::string> keys) override;

 private:
  void count_wait(const std::vector<std::string>& keys, bool timed_out);
  // MULTI_GET counted; through the inner store's multi_get (which waits) or multi_get_existing.
  rdzv::asio::awaitable<std::vector<rdzv::Bytes>> counted_multi_get(std::vector<std::string> keys,
                                                                     bool wait_first);
  rdzv::Store& inner_;
  WireCounts& counts_;
};

}  // namespace ddp::bench
