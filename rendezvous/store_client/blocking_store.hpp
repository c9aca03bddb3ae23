#pragma once
// BlockingStore: the one synchronous, thread-safe face of a Store, for code that is not on an
// Asio loop: libddp and its collectives (Gloo and NCCL rendezvous, arrival marks, shared-memory
// set-up), the Gloo store adapter, ddp-store's client verbs, benchmarks. Any rdzv::Store can be
// behind it: the job's TCPStore (connect) or a MemoryStore (in_memory: threads of one process
// playing the ranks of a group). Keys of a view get their prefix from a PrefixStore, the one way
// keys are prefixed. Every call may come from any thread; the store itself runs on a private
// io_context on a thread of its own, so a call that waits (a peer's address not published yet)
// never keeps another thread's call from reaching the store. Over a TCPStore the calls still take
// turns on its one connection, as TcpStoreClient serialises them. This header is free of Asio (the
// loop is behind a pointer), so the collectives and libddp that include it never parse Asio;
// over(), whose factory names Asio's executor, is in blocking_store_over.hpp.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store/bytes.hpp"
#include "rendezvous/store_client/connect_options.hpp"

namespace ddp::rdzv {

class Store;
namespace detail {
struct StoreLoop;  // the private io_context, its thread and the Store on it (blocking_store.cpp)
}

class BlockingStore {
 public:
  // Connects to the TCPStore at host:port (TcpStoreClient::connect: its errors and deadlines).
  // Keys get "<prefix>/" when `prefix` is not empty.
  static std::unique_ptr<BlockingStore> connect(const std::string& host, std::uint16_t port,
                                                ConnectOptions options = {},
                                                std::string prefix = "");
  // A MemoryStore of its own, described as "memory".
  static std::unique_ptr<BlockingStore> in_memory();
  // Any other Store: blocking_store_over(). The view of `loop`'s store with keys under `prefix`
  // ("": none); only this file's factories and blocking_store_over() have a loop to give.
  BlockingStore(std::shared_ptr<detail::StoreLoop> loop, std::string prefix);
  ~BlockingStore();
  BlockingStore(const BlockingStore&) = delete;
  BlockingStore& operator=(const BlockingStore&) = delete;

  // A view whose keys are prefixed_key(<this view's prefix>/<name>, key): with_prefix("world")
  // then with_prefix("group_1") writes "world/group_1/<key>". It shares this store (and its
  // connection) and keeps it alive.
  std::shared_ptr<BlockingStore> with_prefix(const std::string& name);

  // The Store operations (store.hpp has each one's contract), run to completion.
  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key);  // waits up to timeout() for the key
  // Waits up to `timeout` for the key, then returns its value; TimeoutError names the key.
  Bytes get(const std::string& key, std::chrono::milliseconds timeout);
  std::int64_t add(const std::string& key, std::int64_t delta);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool check(const std::vector<std::string>& keys);  // every key exists now (no waiting)
  void wait(const std::vector<std::string>& keys);   // up to timeout()
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::int64_t num_keys();
  bool delete_key(const std::string& key);
  void append(const std::string& key, const Bytes& value);
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys);
  void multi_set(const std::vector<std::pair<std::string, Bytes>>& kvs);

  // The deadline of calls without one, shared by every view of the store.
  std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);
  const std::string& address() const;  // "host:port", or "memory"
  const std::string& prefix() const;   // this view's, "" for none
  // "<address>/<prefix>" (or the address alone), for messages.
  std::string describe() const;

 private:
  Store& store();  // this view's Store: the loop's own, or a PrefixStore over it

  std::shared_ptr<detail::StoreLoop> loop_;
  std::string prefix_;
  std::unique_ptr<Store> prefixed_;  // a PrefixStore over the loop's store when prefix_ is set
};

}  // namespace ddp::rdzv
