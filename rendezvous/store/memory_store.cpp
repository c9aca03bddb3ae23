// MemoryStore: the Store interface over a KeyTable. A wait parks a callback in the table that
// cancels a timer; the coroutine sleeps on that timer, so it wakes on the key or on the deadline.

#include "rendezvous/store/memory_store.hpp"

#include "ddp/error.hpp"
#include "rendezvous/store/key_leases.hpp"
#include "rendezvous/store/key_table.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ddp::rdzv {

struct MemoryStore::State {
  explicit State(asio::any_io_executor ex) : executor(std::move(ex)), leases(executor, table) {}
  asio::any_io_executor executor;
  KeyTable table;
  KeyLeases leases;  // store leases (store_lease.hpp): expire when their holder's wait drops
};

MemoryStore::MemoryStore(asio::any_io_executor executor)
    : state_(std::make_unique<State>(std::move(executor))) {}

MemoryStore::~MemoryStore() = default;

KeyTable& MemoryStore::table() { return state_->table; }

asio::awaitable<void> MemoryStore::set(std::string key, Bytes value) {
  state_->table.set(key, std::move(value));
  co_return;
}

asio::awaitable<Bytes> MemoryStore::get(std::string key) {
  const auto deadline = std::chrono::steady_clock::now() + timeout();
  // A key can be deleted between its waiter waking and this coroutine resuming: wait again.
  for (;;) {
    if (const Bytes* value = state_->table.find(key)) co_return *value;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::vector<std::string> keys{key};
    co_await wait(std::move(keys), std::max(left, std::chrono::milliseconds(0)));
  }
}

asio::awaitable<std::int64_t> MemoryStore::add(std::string key, std::int64_t delta) {
  co_return state_->table.add(key, delta);
}

asio::awaitable<Bytes> MemoryStore::compare_set(std::string key, Bytes expected, Bytes desired) {
  co_return state_->table.compare_set(key, expected, std::move(desired));
}

asio::awaitable<bool> MemoryStore::check(std::vector<std::string> keys) {
  co_return state_->table.contains_all(keys);
}

asio::awaitable<bool> MemoryStore::wait_for(std::vector<std::string> keys,
                                            std::chrono::milliseconds timeout) {
  auto timer = std::make_shared<asio::steady_timer>(state_->executor, timeout);
  auto woken = std::make_shared<bool>(false);
  const auto id = state_->table.wait(keys, [timer, woken] {
    *woken = true;
    timer->cancel();
  });
  if (!id) co_return true;
  boost::system::error_code ec;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (*woken) co_return true;
  state_->table.cancel_wait(*id);
  co_return false;
}

asio::awaitable<void> MemoryStore::wait(std::vector<std::string> keys,
                                        std::chrono::milliseconds timeout) {
  const bool present = co_await wait_for(keys, timeout);
  if (present) co_return;
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!state_->table.contains(key)) missing.push_back(key);
  }
  throw TimeoutError(fmt::format("store wait({}) timed out after {}ms (in-process store)",
                                 fmt::join(missing, ", "), timeout.count()));
}

asio::awaitable<std::int64_t> MemoryStore::num_keys() {
  co_return static_cast<std::int64_t>(state_->table.size());
}

asio::awaitable<bool> MemoryStore::delete_key(std::string key) {
  co_return state_->table.erase(key);
}

asio::awaitable<void> MemoryStore::append(std::string key, Bytes value) {
  state_->table.append(key, std::move(value));
  co_return;
}

asio::awaitable<std::vector<Bytes>> MemoryStore::multi_get_existing(
    std::vector<std::string> keys) {
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) {
    const Bytes* value = state_->table.find(key);
    values.push_back(value ? *value : Bytes{});
  }
  co_return values;
}

}  // namespace ddp::rdzv
