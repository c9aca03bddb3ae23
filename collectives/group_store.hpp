#pragma once
// GroupStore: the synchronous, thread-safe key-value store a process group rendezvouses through
// (Gloo addresses, NCCL unique ids, arrival marks for timeout reports). Implementations:
// MemoryGroupStore (threads of one process: unit tests) and BlockingGroupStore (the job's
// TCPStore through rdzv::BlockingStore). Keys of a sub-group get a prefix (with_prefix).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp::coll {

using StoreBytes = std::vector<std::uint8_t>;

class GroupStore {
 public:
  virtual ~GroupStore() = default;

  virtual void set(const std::string& key, const StoreBytes& value) = 0;
  // Waits up to `timeout` for key; throws ddp::TimeoutError naming the key.
  virtual StoreBytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Waits up to `timeout` for every key; throws ddp::TimeoutError naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // True when key exists now (no waiting).
  virtual bool check(const std::string& key) = 0;

  // A view of this store whose keys are rdzv::prefixed_key(<this view's prefix>/<name>, key):
  // with_prefix("world")->with_prefix("group_1") writes "world/group_1/<key>". The view shares
  // the connection.
  virtual std::shared_ptr<GroupStore> with_prefix(const std::string& name) = 0;

  // Where the store is, for messages ("memory:world", "10.0.0.1:29500/ddp/attempt_0/world").
  virtual std::string describe() const = 0;
};

}  // namespace ddp::coll
