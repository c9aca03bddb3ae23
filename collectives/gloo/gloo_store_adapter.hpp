#pragma once
// GlooStoreAdapter: gloo's rendezvous Store interface (the 2022 Debian API: set, get, wait) over a
// rdzv::BlockingStore, so Gloo's connectFullMesh exchanges addresses through the job's TCPStore, as
// PyTorch's ProcessGroupGloo does. get and wait(keys) use the adapter's timeout.

#include <gloo/rendezvous/store.h>

#include <memory>

#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<rdzv::BlockingStore> store, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<rdzv::BlockingStore> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace ddp::coll
