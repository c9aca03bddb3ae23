// A store a member can no longer reach (its link cut: requests go out, no answer comes back):
// every member of a running round notices within its calls' deadline, also one that reads no
// heartbeats and only beats. Over TCP a SET has no reply, so beats that were SETs went out
// forever and such a member waited on its hung workers.

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

// The store as one member sees it over a link that can be cut. Once cut, what the TCP client
// sends without waiting for a reply (set, multi_set, append) still "succeeds"; every call that
// waits for a reply fails with TimeoutError after its deadline, as TcpStoreClient's do.
class CuttableStore final : public Store {
 public:
  CuttableStore(asio::any_io_executor executor, Store& inner)
      : executor_(std::move(executor)), inner_(inner) {
    set_timeout(std::chrono::milliseconds(100));
  }
  bool cut = false;

  asio::awaitable<void> set(std::string key, Bytes value) override {
    if (!cut) co_await inner_.set(std::move(key), std::move(value));
  }
  asio::awaitable<Bytes> get(std::string key) override {
    co_await unanswered(key);
    co_return co_await inner_.get(std::move(key));
  }
  asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override {
    co_await unanswered(key);
    co_return co_await inner_.add(std::move(key), delta);
  }
  asio::awaitable<Bytes> compare_set(std::string key, Bytes expected, Bytes desired) override {
    co_await unanswered(key);
    co_return co_await inner_.compare_set(std::move(key), std::move(expected), std::move(desired));
  }
  asio::awaitable<bool> check(std::vector<std::string> keys) override {
    co_await unanswered("check");
    co_return co_await inner_.check(std::move(keys));
  }
  asio::awaitable<void> wait(std::vector<std::string> keys,
                             std::chrono::milliseconds timeout) override {
    co_await unanswered("wait");
    co_await inner_.wait(std::move(keys), timeout);
  }
  asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                 std::chrono::milliseconds timeout) override {
    if (cut) {  // a parked wait on a cut link just never returns within its timeout
      asio::steady_timer timer(executor_, timeout);
      co_await timer.async_wait(asio::use_awaitable);
      co_return false;
    }
    co_return co_await inner_.wait_for(std::move(keys), timeout);
  }
  asio::awaitable<std::int64_t> num_keys() override {
    co_await unanswered("num_keys");
    co_return co_await inner_.num_keys();
  }
  asio::awaitable<bool> delete_key(std::string key) override {
    co_await unanswered(key);
    co_return co_await inner_.delete_key(std::move(key));
  }
  asio::awaitable<void> append(std::string key, Bytes value) override {
    if (!cut) co_await inner_.append(std::move(key), std::move(value));
  }
  asio::awaitable<std::vector<Bytes>> multi_get(std::vector<std::string> keys) override {
    co_await unanswered("multi_get");
    co_return co_await inner_.multi_get(std::move(keys));
  }
  asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) override {
    if (!cut) co_await inner_.multi_set(std::move(kvs));
  }
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) override {
    co_await unanswered("multi_get_existing");
    co_return co_await inner_.multi_get_existing(std::move(keys));
  }

 private:
  // Once cut, a call that waits for a reply times out after the deadline.
  asio::awaitable<void> unanswered(const std::string& what) {
    if (!cut) co_return;
    asio::steady_timer timer(executor_, timeout());
    co_await timer.async_wait(asio::use_awaitable);
    throw ddp::TimeoutError("store call " + what + " got no reply (link cut)");
  }

  asio::any_io_executor executor_;
  Store& inner_;
};

}  // namespace

TEST_CASE("every member of a running round notices a cut link, also one that only beats",
          "[c10d][cut]") {
  // Three members: join indices 1 and 3 read heartbeats, index 2 only beats.
  C10dSettings s = fast_settings(3, 3);
  s.keep_alive_max_attempt = 3;  // every third beat asks for a reply
  asio::io_context io;
  MemoryStore store{io.get_executor()};
  std::vector<std::unique_ptr<CuttableStore>> links;
  std::vector<std::unique_ptr<C10dRendezvous>> nodes;
  for (int i = 0; i < 3; ++i) {
    links.push_back(std::make_unique<CuttableStore>(io.get_executor(), store));
    nodes.push_back(std::make_unique<C10dRendezvous>(
        io.get_executor(), *links.back(), s,
        C10dNode{"10.0.0." + std::to_string(i), "n" + std::to_string(i), false}, nullptr));
  }
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> rounds;
  for (auto& node : nodes) rounds.push_back(spawn(io, node->next_round(1)));
  REQUIRE(run_until(io, [&] { return all_done(rounds); }));
  for (const auto& r : rounds) REQUIRE(r->get().group_world_size == 3);

  std::vector<std::shared_ptr<Outcome<RoundEvent>>> watches;
  for (auto& node : nodes) watches.push_back(spawn(io, node->watch_round()));
  for (auto& link : links) link->cut = true;
  REQUIRE(run_until(io, [&] { return all_done(watches); }));
  for (const auto& w : watches) {
    CHECK_THROWS_AS(w->get(), ddp::TimeoutError);
  }
}
