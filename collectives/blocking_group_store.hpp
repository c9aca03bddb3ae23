#pragma once
// BlockingGroupStore: a GroupStore over the job's TCPStore, through one rdzv::BlockingStore
// connection shared (under a mutex) by every view and every thread of the process's groups.

#include <memory>
#include <mutex>

#include "collectives/group_store.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll {

class BlockingGroupStore final : public GroupStore {
 public:
  explicit BlockingGroupStore(std::unique_ptr<rdzv::BlockingStore> store);

  void set(const std::string& key, const StoreBytes& value) override;
  StoreBytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  std::shared_ptr<GroupStore> with_prefix(const std::string& name) override;
  std::string describe() const override;

 private:
  struct Connection {
    std::mutex mutex;
    std::unique_ptr<rdzv::BlockingStore> store;
  };
  BlockingGroupStore(std::shared_ptr<Connection> connection, std::string prefix);
  std::vector<std::string> keys_of(const std::vector<std::string>& keys) const;

  std::shared_ptr<Connection> connection_;
  std::string prefix_;
};

}  // namespace ddp::coll
