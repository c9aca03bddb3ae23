#pragma once
// StoreCoordination: Coordination over a TCPStore (any rdzv::Store, usually the c10d
// rendezvous's PrefixStore). A tally is a counter key (ADD), create is COMPARE_SET from absent,
// get is a CHECK and one MULTI_GET, put one MULTI_SET, wait_for a WAIT. The store must outlive
// it; runs on the store's io_context.

#include "rendezvous/engine/coordination.hpp"

namespace ddp::rdzv {

class StoreCoordination final : public Coordination {
 public:
  explicit StoreCoordination(Store& store) : store_(store) {}

  // One ADD of 1 to the counter `tally` (`node` is not stored: the counter counts calls).
  asio::awaitable<std::int64_t> arrive(std::string tally, std::string node) override;
  asio::awaitable<std::int64_t> count(std::string tally) override;  // an ADD of 0
  asio::awaitable<Bytes> create(std::string key, Bytes value) override;
  asio::awaitable<std::vector<std::optional<Bytes>>> get(std::vector<std::string> keys) override;
  asio::awaitable<void> put(std::vector<std::pair<std::string, Bytes>> kvs) override;
  asio::awaitable<bool> wait_for(std::string key, std::chrono::milliseconds timeout) override;

 private:
  Store& store_;
};

// The values of `keys` in order, nullopt for an absent key: a CHECK first (PyTorch's servers close
// the connection on a MULTI_GET of a missing key), then one MULTI_GET of the keys that exist.
// `exists` holds a flag per key, kept by a caller that reads the same keys again (a key that
// exists stays): once every key was seen to exist, the read is the MULTI_GET alone.
asio::awaitable<std::vector<std::optional<Bytes>>> get_existing_keys(
    Store& store, const std::vector<std::string>& keys, std::vector<char>& exists);

}  // namespace ddp::rdzv
