// The shared WAIT: the first member to wait on a key list starts one WAIT on the waits connection
// and later ones join it; each leaves on its own deadline. The WAIT runs until the keys exist or
// until no member waits any longer (its deadline is the latest of its members'), so a round
// that closes wakes each link once, not each member.

#include "apps/ddp-bench/rendezvous/shared_link.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

#include "common/log.hpp"

namespace ddp::bench {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct SharedLink::Wait {
  explicit Wait(asio::any_io_executor executor) : done(std::move(executor)) {
    done.expires_at(Clock::time_point::max());
  }
  std::vector<std::string> keys;
  asio::steady_timer done;  // never expires; cancelled when the WAIT ends
  bool finished = false;
  bool arrived = false;
  std::exception_ptr error;
  int members = 0;                // members waiting now
  Clock::time_point until;        // the latest deadline of any member that joined
};

SharedLink::SharedLink(asio::any_io_executor executor,
                       std::unique_ptr<rdzv::TcpStoreClient> calls,
                       std::unique_ptr<rdzv::TcpStoreClient> waits)
    : executor_(std::move(executor)), calls_(std::move(calls)), waits_(std::move(waits)) {}

SharedLink::~SharedLink() = default;

asio::awaitable<std::unique_ptr<SharedLink>> SharedLink::connect(std::string host,
                                                                std::uint16_t port,
                                                                rdzv::ConnectOptions options) {
  auto calls = co_await rdzv::TcpStoreClient::connect(host, port, options);
  auto waits = co_await rdzv::TcpStoreClient::connect(host, port, options);
  auto executor = co_await asio::this_coro::executor;
  co_return std::unique_ptr<SharedLink>(
      new SharedLink(executor, std::move(calls), std::move(waits)));
}

asio::awaitable<bool> SharedLink::wait_for(std::vector<std::string> keys, milliseconds timeout) {
  std::string id;
  for (const auto& key : keys) (id += key) += '\n';
  std::shared_ptr<Wait>& slot = pending_[id];
  const bool start = !slot;
  if (start) {
    slot = std::make_shared<Wait>(executor_);
    slot->keys = std::move(keys);
  }
  const std::shared_ptr<Wait> wait = slot;
  ++wait->members;
  wait->until = std::max(wait->until, Clock::now() + timeout);
  if (start) {
    // (co_spawn may run run_wait inline up to its first suspension: the member is counted first.)
    asio::co_spawn(executor_, run_wait(wait, id), [](std::exception_ptr) {});
  }
  if (!wait->finished) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer deadline(executor_, timeout);
    co_await (wait->done.async_wait(asio::as_tuple(asio::use_awaitable)) ||
              deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
  }
  --wait->members;
  if (wait->finished && wait->error) std::rethrow_exception(wait->error);
  co_return wait->finished && wait->arrived;
}

asio::awaitable<void> SharedLink::run_wait(std::shared_ptr<Wait> wait, std::string id) {
  try {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(wait->until - Clock::now());
      const bool present = co_await waits_->wait_for(wait->keys, std::max(left, milliseconds(1)));
      if (present) {
        wait->arrived = true;
        break;
      }
      if (wait->members == 0 && Clock::now() >= wait->until) break;
    }
  } catch (const std::exception& e) {
    log::get("rdzv")->warn("shared wait failed: {}", e.what());
    wait->error = std::current_exception();
  }
  wait->finished = true;
  const auto it = pending_.find(id);
  if (it != pending_.end() && it->second == wait) pending_.erase(it);
  wait->done.cancel();
}

MemberStore::MemberStore(SharedLink& link) : link_(link) { set_timeout(link.calls().timeout()); }

asio::awaitable<void> MemberStore::set(std::string key, rdzv::Bytes value) {
  return link_.calls().set(std::move(key), std::move(value));
}
asio::awaitable<rdzv::Bytes> MemberStore::get(std::string key) {
  return link_.calls().get(std::move(key));
}
asio::awaitable<std::int64_t> MemberStore::add(std::string key, std::int64_t delta) {
  return link_.calls().add(std::move(key), delta);
}
asio::awaitable<rdzv::Bytes> MemberStore::compare_set(std::string key, rdzv::Bytes expected,
                                                      rdzv::Bytes desired) {
  return link_.calls().compare_set(std::move(key), std::move(expected), std::move(desired));
}
asio::awaitable<bool> MemberStore::check(std::vector<std::string> keys) {
  return link_.calls().check(std::move(keys));
}
asio::awaitable<void> MemberStore::wait(std::vector<std::string> keys, milliseconds timeout) {
  const bool arrived = co_await link_.wait_for(keys, timeout);
  if (!arrived) co_await link_.calls().wait(std::move(keys), milliseconds(1));  // throws
}
asio::awaitable<bool> MemberStore::wait_for(std::vector<std::string> keys, milliseconds timeout) {
  return link_.wait_for(std::move(keys), timeout);
}
asio::awaitable<std::int64_t> MemberStore::num_keys() { return link_.calls().num_keys(); }
asio::awaitable<bool> MemberStore::delete_key(std::string key) {
  return link_.calls().delete_key(std::move(key));
}
asio::awaitable<void> MemberStore::append(std::string key, rdzv::Bytes value) {
  return link_.calls().append(std::move(key), std::move(value));
}
asio::awaitable<std::vector<rdzv::Bytes>> MemberStore::multi_get(std::vector<std::string> keys) {
  return link_.calls().multi_get(std::move(keys));
}
asio::awaitable<std::vector<rdzv::Bytes>> MemberStore::multi_get_existing(
    std::vector<std::string> keys) {
  return link_.calls().multi_get_existing(std::move(keys));
}
asio::awaitable<void> MemberStore::multi_set(
    std::vector<std::pair<std::string, rdzv::Bytes>> kvs) {
  return link_.calls().multi_set(std::move(kvs));
}

}  // namespace ddp::bench
