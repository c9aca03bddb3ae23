// MemoryGroupStore: a map under a mutex; waiters sleep on one condition variable.
#include "collectives/memory_group_store.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ddp/error.hpp"
#include "rendezvous/store/prefix_store.hpp"

namespace ddp::coll {

MemoryGroupStore::MemoryGroupStore() : state_(std::make_shared<State>()) {}

MemoryGroupStore::MemoryGroupStore(std::shared_ptr<State> state, std::string prefix)
    : state_(std::move(state)), prefix_(std::move(prefix)) {}

void MemoryGroupStore::set(const std::string& key, const StoreBytes& value) {
  {
    std::lock_guard lock(state_->mutex);
    state_->values.insert_or_assign(rdzv::prefixed_key(prefix_, key), value);
  }
  state_->changed.notify_all();
}

StoreBytes MemoryGroupStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  std::lock_guard lock(state_->mutex);
  return state_->values.at(rdzv::prefixed_key(prefix_, key));
}

void MemoryGroupStore::wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) {
  std::unique_lock lock(state_->mutex);
  auto missing = [&] {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      auto full = rdzv::prefixed_key(prefix_, k);
      if (!state_->values.contains(full)) out.push_back(std::move(full));
    }
    return out;
  };
  if (!state_->changed.wait_for(lock, timeout, [&] { return missing().empty(); })) {
    throw TimeoutError(fmt::format("store wait({}) timed out after {}ms in memory store",
                                   fmt::join(missing(), ", "), timeout.count()));
  }
}

bool MemoryGroupStore::check(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->values.contains(rdzv::prefixed_key(prefix_, key));
}

std::shared_ptr<GroupStore> MemoryGroupStore::with_prefix(const std::string& name) {
  return std::shared_ptr<GroupStore>(
      new MemoryGroupStore(state_, rdzv::prefixed_key(prefix_, name)));
}

std::string MemoryGroupStore::describe() const { return fmt::format("memory:{}", prefix_); }

}  // namespace ddp::coll
