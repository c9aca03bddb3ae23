// OpWorker: operations run one at a time in submission order, on the worker or, when the caller
// waits for the next one while none runs, on the caller's thread.

#include "collectives/op_worker.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

using ddp::coll::OpWorker;

TEST_CASE("a caller waiting for the next operation runs it on its own thread", "[op_worker]") {
  OpWorker worker;
  // Keep the worker busy until the first operation is waited for, so the second is still queued.
  std::promise<void> release;
  auto blocker = worker.submit([gate = release.get_future().share()] { gate.wait(); });
  std::thread::id ran_on;
  auto work = worker.submit([&] { ran_on = std::this_thread::get_id(); });
  release.set_value();
  blocker->wait();
  work->wait();
  CHECK(work->is_completed());
  // Either the caller took it (the usual case) or the worker had already started it.
  CHECK(ran_on != std::thread::id{});

  // With the worker idle, submit-then-wait runs on the caller as long as the caller is faster
  // than the worker's wake-up; over many tries it is at least once (on a loaded machine the worker
  // can win hundreds of times in a row, so keep trying until the caller wins once).
  int on_caller = 0;
  for (int i = 0; i < 20000 && on_caller == 0; ++i) {
    std::thread::id id;
    worker.submit([&] { id = std::this_thread::get_id(); })->wait();
    if (id == std::this_thread::get_id()) ++on_caller;
  }
  CHECK(on_caller > 0);
}

TEST_CASE("operations run one at a time in submission order, whoever runs them", "[op_worker]") {
  OpWorker worker;
  std::atomic<int> running{0};
  std::atomic<int> overlaps{0};
  std::vector<int> order;
  std::vector<std::shared_ptr<ddp::Work>> works;
  for (int i = 0; i < 500; ++i) {
    works.push_back(worker.submit([&, i] {
      if (running.fetch_add(1) != 0) ++overlaps;
      order.push_back(i);
      running.fetch_sub(1);
    }));
    if (i % 3 == 0) works.back()->wait();  // some on the caller, some on the worker
  }
  // Waiting for a later operation first must not run it before the earlier ones.
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  CHECK(overlaps == 0);
  REQUIRE(order.size() == 500);
  for (int i = 0; i < 500; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("an operation's exception reaches wait() on either thread", "[op_worker]") {
  OpWorker worker;
  for (int i = 0; i < 20; ++i) {
    auto work = worker.submit([] { throw std::runtime_error("boom"); });
    CHECK_THROWS_WITH(work->wait(), "boom");
    CHECK_THROWS_WITH(work->wait(), "boom");  // again, once done
  }
}

TEST_CASE("the destructor finishes queued operations nobody waited for", "[op_worker]") {
  std::atomic<int> ran{0};
  {
    OpWorker worker;
    for (int i = 0; i < 50; ++i) worker.submit([&] { ++ran; });
  }
  CHECK(ran == 50);
}
