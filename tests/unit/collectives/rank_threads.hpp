#pragma once
// Test helper: plays every rank of a Gloo group as a thread of this process, sharing one
// MemoryGroupStore, and rethrows the first exception a rank threw. Groups use Gloo's ring unless
// `algorithm` says otherwise.

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/memory_group_store.hpp"

namespace ddp::coll::test {

inline void run_ranks(int size, const std::function<void(GlooProcessGroup&)>& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20),
                      AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing) {
  auto store = std::make_shared<MemoryGroupStore>();
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        GlooOptions options;
        options.timeout = timeout;
        options.algorithm = algorithm;
        auto group = GlooProcessGroup::create(store, r, size, options);
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

template <class T>
Tensor tensor_of(std::vector<T>& v, DType dtype) {
  return Tensor{v.data(), v.size(), dtype};
}

}  // namespace ddp::coll::test
