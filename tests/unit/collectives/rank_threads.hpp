#pragma once
// Test helper: plays every rank of a Gloo group as a thread of this process, sharing one
// BlockingStore::in_memory() (a MemoryStore), and rethrows the first exception a rank threw.
// Groups use Gloo's ring unless `algorithm` says otherwise; run_ranks_on_hosts plays a group
// spread over several hosts.

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_process_group.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::coll::test {

// Runs body on `size` threads, rank r's group created with options_of(r).
inline void run_ranks_with(int size, const std::function<GlooOptions(int)>& options_of,
                           const std::function<void(GlooProcessGroup&)>& body) {
  auto store = std::shared_ptr<rdzv::BlockingStore>(rdzv::BlockingStore::in_memory());
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto group = GlooProcessGroup::create(store, r, size, options_of(r));
        body(*group);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline void run_ranks(int size, const std::function<void(GlooProcessGroup&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20),
                      AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing) {
  run_ranks_with(
      size,
      [&](int) {
        GlooOptions options;
        options.timeout = timeout;
        options.algorithm = algorithm;
        return options;
      },
      body);
}

// Automatic algorithm choice, with rank r pretending to live on hosts[r] (its shared-memory
// domain), so that one process plays a multi-host group.
inline void run_ranks_on_hosts(const std::vector<std::string>& hosts,
                               const std::function<void(GlooProcessGroup&)>& body,
                               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  run_ranks_with(
      static_cast<int>(hosts.size()),
      [&](int r) {
        GlooOptions options;
        options.timeout = timeout;
        options.shm_domain = hosts[static_cast<std::size_t>(r)];
        return options;
      },
      body);
}

template <class T>
Tensor tensor_of(std::vector<T>& v, DType dtype) {
  return Tensor{v.data(), v.size(), dtype};
}

}  // namespace ddp::coll::test
