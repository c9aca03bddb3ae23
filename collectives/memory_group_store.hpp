#pragma once
// MemoryGroupStore: a GroupStore in the memory of one process, shared by threads that play the
// ranks of a group (unit tests, world size 1). Thread-safe.

#include <condition_variable>
#include <map>
#include <mutex>

#include "collectives/group_store.hpp"

namespace ddp::coll {

class MemoryGroupStore final : public GroupStore {
 public:
  MemoryGroupStore();

  void set(const std::string& key, const StoreBytes& value) override;
  StoreBytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  std::shared_ptr<GroupStore> with_prefix(const std::string& name) override;
  std::string describe() const override;

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::string, StoreBytes> values;
  };
  MemoryGroupStore(std::shared_ptr<State> state, std::string prefix);

  std::shared_ptr<State> state_;
  std::string prefix_;
};

}  // namespace ddp::coll
