// Reducer over real Gloo groups, two ranks played by threads of this process over one
// BlockingStore::in_memory() (a MemoryStore).

#include "ddp/reducer.hpp"

#include <catch2/catch.hpp>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "collectives/gloo/gloo_process_group.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
#include "tests/unit/train/stub_group.hpp"

namespace {

// Runs body(group) on `size` threads, one Gloo rank each; rethrows the first failure.
void run_ranks(int size, const std::function<void(std::shared_ptr<ddp::ProcessGroup>)>& body) {
  auto store = std::shared_ptr<ddp::rdzv::BlockingStore>(ddp::rdzv::BlockingStore::in_memory());
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        ddp::coll::GlooOptions options;
        options.timeout = std::chrono::seconds(20);
        body(ddp::coll::GlooProcessGroup::create(store, r, size, options));
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

// Three "parameters" whose gradients sit in one buffer in reverse order, as the Mlp lays them out.
struct Grads {
  std::vector<float> flat;
  std::vector<ddp::GradientSlot> slots;
  Grads(std::size_t a, std::size_t b, std::size_t c) : flat(a + b + c) {
    slots = {{"p0", flat.data() + b + c, a}, {"p1", flat.data() + c, b}, {"p2", flat.data(), c}};
  }
};

}  // namespace

TEST_CASE("buckets form in reverse order with a small first bucket", "[reducer]") {
  run_ranks(1, [](std::shared_ptr<ddp::ProcessGroup> g) {
    Grads grads(300, 200, 100);  // floats: 1200, 800, 400 bytes
    ddp::ReducerOptions o;
    o.first_bucket_cap_bytes = 400;
    o.bucket_cap_bytes = 1000;
    ddp::Reducer r(g, grads.slots, o);
    // p2 fills the first bucket; p1 (800 B) then p0 push the second one past its cap.
    CHECK(r.bucket_slots() == std::vector<std::vector<std::size_t>>{{2}, {1, 0}});
    ddp::ReducerOptions big;
    ddp::Reducer one(g, grads.slots, big);
    CHECK(one.bucket_slots() == std::vector<std::vector<std::size_t>>{{2, 1, 0}});
  });
}

TEST_CASE("after finalize every gradient is the mean over ranks", "[reducer]") {
  run_ranks(2, [](std::shared_ptr<ddp::ProcessGroup> g) {
    Grads grads(50, 30, 20);
    ddp::ReducerOptions o;
    o.first_bucket_cap_bytes = 80;
    o.bucket_cap_bytes = 100;
    ddp::Reducer r(g, grads.slots, o);
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < grads.flat.size(); ++i) {
        grads.flat[i] = static_cast<float>((g->rank() + 1) * (i + round));
      }
      for (std::size_t s : {2u, 1u, 0u}) r.mark_ready(s);
      r.finalize();
      for (std::size_t i = 0; i < grads.flat.size(); ++i) {
        REQUIRE(grads.flat[i] == Approx(1.5 * static_cast<double>(i + round)));
      }
    }
  });
}

TEST_CASE("gradients not adjacent in memory are packed, reduced and unpacked", "[reducer]") {
  run_ranks(2, [](std::shared_ptr<ddp::ProcessGroup> g) {
    std::vector<float> a(10, static_cast<float>(g->rank()));
    std::vector<float> b(7, static_cast<float>(2 * g->rank()));
    ddp::Reducer r(g, {{"a", a.data(), a.size()}, {"b", b.data(), b.size()}});
    REQUIRE(r.bucket_slots().size() == 1);
    r.mark_ready(1);
    r.mark_ready(0);
    r.finalize();
    CHECK(a == std::vector<float>(10, 0.5f));
    CHECK(b == std::vector<float>(7, 1.0f));
  });
}

TEST_CASE("no_sync leaves gradients local until a synchronised backward", "[reducer]") {
  run_ranks(2, [](std::shared_ptr<ddp::ProcessGroup> g) {
    Grads grads(4, 3, 2);
    ddp::Reducer r(g, grads.slots);
    std::fill(grads.flat.begin(), grads.flat.end(), static_cast<float>(g->rank() + 1));
    r.set_require_sync(false);
    for (std::size_t s : {2u, 1u, 0u}) r.mark_ready(s);
    r.finalize();
    CHECK(grads.flat == std::vector<float>(9, static_cast<float>(g->rank() + 1)));
    for (float& v : grads.flat) v *= 2;  // a second micro-step accumulates
    r.set_require_sync(true);
    for (std::size_t s : {2u, 1u, 0u}) r.mark_ready(s);
    r.finalize();
    CHECK(grads.flat == std::vector<float>(9, 3.0f));
  });
}

TEST_CASE("a gradient never marked ready or marked twice is reported by name", "[reducer]") {
  run_ranks(1, [](std::shared_ptr<ddp::ProcessGroup> g) {
    Grads grads(4, 3, 2);
    ddp::ReducerOptions o;
    o.first_bucket_cap_bytes = 4;
    ddp::Reducer r(g, grads.slots, o);
    r.mark_ready(2);
    CHECK_THROWS_WITH(r.mark_ready(2), Catch::Contains("gradient p2 marked ready twice"));
    r.mark_ready(1);
    CHECK_THROWS_WITH(r.finalize(), Catch::Contains("gradient p0 was never marked ready"));
    r.mark_ready(0);
  });
}

TEST_CASE("CUDA gradients must be contiguous and on one device", "[reducer]") {
  // Checked at construction, before any memory is touched: host memory stands in for the device.
  run_ranks(1, [](std::shared_ptr<ddp::ProcessGroup> g) {
    std::vector<float> flat(9);
    std::vector<ddp::GradientSlot> forward_order = {
        {"p0", flat.data(), 4}, {"p1", flat.data() + 4, 3}, {"p2", flat.data() + 7, 2}};
    for (auto& s : forward_order) s.device = ddp::DeviceKind::kCuda;
    CHECK_THROWS_WITH(ddp::Reducer(g, forward_order),
                      Catch::Contains("CUDA gradients p2, p1, p0 share a bucket but are not "
                                      "adjacent"));
    Grads grads(4, 3, 2);  // reverse order: contiguous
    for (auto& s : grads.slots) s.device = ddp::DeviceKind::kCuda;
    grads.slots[1].device_index = 1;
    CHECK_THROWS_WITH(ddp::Reducer(g, grads.slots),
                      Catch::Contains("gradient p1 is on another device than gradient p0"));
    grads.slots[1].device_index = 0;
    grads.slots[2].device = ddp::DeviceKind::kCpu;
    CHECK_THROWS_AS(ddp::Reducer(g, grads.slots), ddp::ConfigError);
  });
}

namespace {

// What the reducer asked of each all-reduce: a device-stream wait, a host wait. The host wait of
// operation `failing` throws, as a peer's failure would.
struct RecordedWork final : ddp::Work {
  std::vector<std::string>* log;
  int id;
  bool fails;
  RecordedWork(std::vector<std::string>* l, int i, bool f) : log(l), id(i), fails(f) {}
  void wait() override {
    log->push_back("wait " + std::to_string(id));
    if (fails) throw ddp::IoError("peer gone in all-reduce " + std::to_string(id));
  }
  bool is_completed() override { return true; }
  void wait_on_stream() override { log->push_back("stream " + std::to_string(id)); }
};

class RecordingGroup final : public ddp::test::StubGroup {
 public:
  std::vector<std::string> log;
  int failing = -1;

  std::shared_ptr<ddp::Work> all_reduce(ddp::Tensor, ddp::ReduceOp) override {
    const int id = next_++;
    log.push_back("all_reduce " + std::to_string(id));
    return std::make_shared<RecordedWork>(&log, id, id == failing);
  }

 private:
  int next_ = 0;
};

}  // namespace

TEST_CASE("CUDA gradients: finalize orders the stream and host-waits one step later",
          "[reducer]") {
  auto group = std::make_shared<RecordingGroup>();
  Grads grads(4, 3, 2);  // host memory stands in for the device: the reducer never touches it
  for (auto& s : grads.slots) s.device = ddp::DeviceKind::kCuda;
  ddp::ReducerOptions o;
  o.first_bucket_cap_bytes = 8;  // p2 alone, then p1 and p0
  group->failing = 1;  // step 1's second bucket fails: the host learns it at step 2
  {
    ddp::Reducer r(group, grads.slots, o);
    for (std::size_t s : {2u, 1u, 0u}) r.mark_ready(s);
    r.finalize();
    CHECK(group->log ==
          std::vector<std::string>{"all_reduce 0", "all_reduce 1", "stream 0", "stream 1"});
    group->log.clear();
    for (std::size_t s : {2u, 1u, 0u}) r.mark_ready(s);
    CHECK_THROWS_WITH(r.finalize(), Catch::Contains("peer gone in all-reduce 1"));
    CHECK(group->log ==
          std::vector<std::string>{"all_reduce 2", "all_reduce 3", "wait 0", "wait 1"});
    group->log.clear();
  }
  // Destroyed with step 2's all-reduces in flight: it waits for them before the buffers go.
  CHECK(group->log == std::vector<std::string>{"wait 2", "wait 3"});
}
