// GlooStoreAdapter: converts between gloo's char vectors and the store's bytes.
#include "collectives/gloo/gloo_store_adapter.hpp"

namespace ddp::coll {

GlooStoreAdapter::GlooStoreAdapter(std::shared_ptr<rdzv::BlockingStore> store,
                                   std::chrono::milliseconds timeout)
    : store_(std::move(store)), timeout_(timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, rdzv::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  auto value = store_->get(key, timeout_);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) { store_->wait(keys, timeout_); }

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  store_->wait(keys, timeout);
}

}  // namespace ddp::coll
