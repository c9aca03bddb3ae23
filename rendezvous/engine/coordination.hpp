#pragma once
// Coordination: the operations the round protocol needs from a coordination service, as the
// c10d and etcd protocols use them: tallies of arrivals, create-if-absent, multi-get and
// multi-set, and a bounded wait for a key. Adapters: StoreCoordination (a TCPStore or any Store,
// store_coordination.hpp) and EtcdCoordination (etcd v3, rendezvous/etcd/etcd_coordination.hpp).
// Keys are the backend's own (each keeps its key layout); what an operation costs differs by
// adapter and is stated there. Runs on the agent's io_context; not thread-safe.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

class Coordination {
 public:
  virtual ~Coordination() = default;

  // A tally counts the nodes that reached one point of a round (the exit barrier, the readers of
  // a failure). `node` arrives at `tally`; returns the arrivals so far, this one included. A
  // node arrives at a tally at most once.
  virtual asio::awaitable<std::int64_t> arrive(std::string tally, std::string node) = 0;
  // The arrivals at `tally` so far.
  virtual asio::awaitable<std::int64_t> count(std::string tally) = 0;

  // Stores `value` at `key` unless the key exists; returns the value that stands (`value` when
  // this call created it). Of racing callers exactly one creates.
  virtual asio::awaitable<Bytes> create(std::string key, Bytes value) = 0;
  // The values of `keys`, in order; nullopt for a key that does not exist. Never waits.
  virtual asio::awaitable<std::vector<std::optional<Bytes>>> get(std::vector<std::string> keys) = 0;
  // Sets every pair, in one request.
  virtual asio::awaitable<void> put(std::vector<std::pair<std::string, Bytes>> kvs) = 0;
  // Waits until `key` exists (true) or `timeout` passes (false).
  virtual asio::awaitable<bool> wait_for(std::string key, std::chrono::milliseconds timeout) = 0;
};

}  // namespace ddp::rdzv
