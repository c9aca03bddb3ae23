// BlockingGroupStore: BlockingStore is not thread-safe, and the group's worker, p2p and arrival
// threads all reach the store, so every call holds the connection's mutex. A long wait (a peer
// that has not published its address yet) holds it too: the other users only write marks.
#include "collectives/blocking_group_store.hpp"

#include "rendezvous/store/prefix_store.hpp"

namespace ddp::coll {

BlockingGroupStore::BlockingGroupStore(std::unique_ptr<rdzv::BlockingStore> store)
    : connection_(std::make_shared<Connection>()) {
  connection_->store = std::move(store);
}

BlockingGroupStore::BlockingGroupStore(std::shared_ptr<Connection> connection, std::string prefix)
    : connection_(std::move(connection)), prefix_(std::move(prefix)) {}

std::vector<std::string> BlockingGroupStore::keys_of(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(rdzv::prefixed_key(prefix_, k));
  return out;
}

void BlockingGroupStore::set(const std::string& key, const StoreBytes& value) {
  std::lock_guard lock(connection_->mutex);
  connection_->store->set(rdzv::prefixed_key(prefix_, key), value);
}

StoreBytes BlockingGroupStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard lock(connection_->mutex);
  connection_->store->wait({rdzv::prefixed_key(prefix_, key)}, timeout);
  return connection_->store->get(rdzv::prefixed_key(prefix_, key));
}

void BlockingGroupStore::wait(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) {
  std::lock_guard lock(connection_->mutex);
  connection_->store->wait(keys_of(keys), timeout);
}

bool BlockingGroupStore::check(const std::string& key) {
  std::lock_guard lock(connection_->mutex);
  return connection_->store->check({rdzv::prefixed_key(prefix_, key)});
}

std::shared_ptr<GroupStore> BlockingGroupStore::with_prefix(const std::string& name) {
  return std::shared_ptr<GroupStore>(
      new BlockingGroupStore(connection_, rdzv::prefixed_key(prefix_, name)));
}

std::string BlockingGroupStore::describe() const {
  const auto& store = *connection_->store;
  return store.address() + "/" + rdzv::prefixed_key(store.prefix(), prefix_);
}

}  // namespace ddp::coll
