// BlockingStore: each call is a coroutine co_spawned onto the private io_context, and the caller
// waits on its future. Only the loop's thread touches the Store (and every PrefixStore view of
// it), so Stores need no locks of their own; concurrent calls are concurrent coroutines, which is
// what lets a MemoryStore wake one thread's wait with another thread's set. Calling from the
// loop's own thread would wait on itself: DDP_CHECK refuses it.
#include "rendezvous/store_client/blocking_store.hpp"

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <thread>
#include <type_traits>

#include "common/check.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store/prefix_store.hpp"
#include "rendezvous/store_client/blocking_store_over.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::rdzv {

struct detail::StoreLoop {
  StoreLoop() : work(asio::make_work_guard(io)), thread([this] { io.run(); }) {}

  // The store goes first, on its own thread (its handlers and timers live there); then the
  // thread ends once nothing is queued, and the io_context goes last.
  ~StoreLoop() {
    asio::post(io, [this] { store.reset(); });
    work.reset();
    thread.join();
  }

  // Runs the awaitable `op()` returns on the loop and waits for it; rethrows its exception.
  template <typename Op>
  typename std::invoke_result_t<Op&>::value_type run(Op op) {
    DDP_CHECK(std::this_thread::get_id() != thread.get_id(),
              "a blocking store call from its own loop thread ({})", address);
    return asio::co_spawn(io, std::move(op), asio::use_future).get();
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::unique_ptr<Store> store;  // set once, before any view exists
  std::string address;
  std::atomic<std::int64_t> timeout_ms{0};
  std::thread thread;  // declared last: starts once everything it uses exists
};

std::unique_ptr<BlockingStore> BlockingStore::connect(const std::string& host, std::uint16_t port,
                                                      ConnectOptions options, std::string prefix) {
  auto loop = std::make_shared<detail::StoreLoop>();
  std::unique_ptr<TcpStoreClient> client =
      loop->run([&]() { return TcpStoreClient::connect(host, port, options); });
  loop->address = client->address();
  loop->timeout_ms = client->timeout().count();
  loop->store = std::move(client);
  return std::make_unique<BlockingStore>(std::move(loop), std::move(prefix));
}

std::unique_ptr<BlockingStore> BlockingStore::in_memory() {
  return blocking_store_over("memory",
                             [](asio::any_io_executor executor) -> std::unique_ptr<Store> {
                               return std::make_unique<MemoryStore>(std::move(executor));
                             });
}

std::unique_ptr<BlockingStore> blocking_store_over(
    std::string address, const std::function<std::unique_ptr<Store>(asio::any_io_executor)>& make) {
  auto loop = std::make_shared<detail::StoreLoop>();
  loop->store = loop->run([&]() -> asio::awaitable<std::unique_ptr<Store>> {
    co_return make(loop->io.get_executor());
  });
  loop->address = std::move(address);
  loop->timeout_ms = loop->store->timeout().count();
  return std::make_unique<BlockingStore>(std::move(loop), "");
}

BlockingStore::BlockingStore(std::shared_ptr<detail::StoreLoop> loop, std::string prefix)
    : loop_(std::move(loop)), prefix_(std::move(prefix)) {
  if (prefix_.empty()) return;
  loop_->run([this]() -> asio::awaitable<void> {
    prefixed_ = std::make_unique<PrefixStore>(prefix_, *loop_->store);
    co_return;
  });
}

// The view's PrefixStore is destroyed on the caller's thread: it holds a reference and no
// handler, and no call of this view is running.
BlockingStore::~BlockingStore() = default;

std::shared_ptr<BlockingStore> BlockingStore::with_prefix(const std::string& name) {
  return std::make_shared<BlockingStore>(loop_, prefixed_key(prefix_, name));
}

Store& BlockingStore::store() { return prefixed_ ? *prefixed_ : *loop_->store; }

void BlockingStore::set(const std::string& key, const Bytes& value) {
  loop_->run([&]() { return store().set(key, value); });
}

Bytes BlockingStore::get(const std::string& key) {
  return loop_->run([&]() { return store().get(key); });
}

Bytes BlockingStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return loop_->run([&]() -> asio::awaitable<Bytes> {
    // Built outside the co_await: GCC 12 rejects a braced list in a coroutine's co_await.
    std::vector<std::string> keys{key};
    co_await store().wait(std::move(keys), timeout);
    co_return co_await store().get(key);
  });
}

std::int64_t BlockingStore::add(const std::string& key, std::int64_t delta) {
  return loop_->run([&]() { return store().add(key, delta); });
}

Bytes BlockingStore::compare_set(const std::string& key, const Bytes& expected,
                                 const Bytes& desired) {
  return loop_->run([&]() { return store().compare_set(key, expected, desired); });
}

bool BlockingStore::check(const std::vector<std::string>& keys) {
  return loop_->run([&]() { return store().check(keys); });
}

void BlockingStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

void BlockingStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  loop_->run([&]() { return store().wait(keys, timeout); });
}

std::int64_t BlockingStore::num_keys() {
  return loop_->run([&]() { return store().num_keys(); });
}

bool BlockingStore::delete_key(const std::string& key) {
  return loop_->run([&]() { return store().delete_key(key); });
}

void BlockingStore::append(const std::string& key, const Bytes& value) {
  loop_->run([&]() { return store().append(key, value); });
}

std::vector<Bytes> BlockingStore::multi_get(const std::vector<std::string>& keys) {
  return loop_->run([&]() { return store().multi_get(keys); });
}

void BlockingStore::multi_set(const std::vector<std::pair<std::string, Bytes>>& kvs) {
  loop_->run([&]() { return store().multi_set(kvs); });
}

std::chrono::milliseconds BlockingStore::timeout() const {
  return std::chrono::milliseconds(loop_->timeout_ms.load());
}

// The loop's store keeps the deadline of every call without one (a view's get goes through to
// it); it is set on the loop's thread, where the store reads it.
void BlockingStore::set_timeout(std::chrono::milliseconds timeout) {
  loop_->run([&]() -> asio::awaitable<void> {
    loop_->store->set_timeout(timeout);
    co_return;
  });
  loop_->timeout_ms = timeout.count();
}

const std::string& BlockingStore::address() const { return loop_->address; }
const std::string& BlockingStore::prefix() const { return prefix_; }

std::string BlockingStore::describe() const {
  return prefix_.empty() ? loop_->address : loop_->address + "/" + prefix_;
}

}  // namespace ddp::rdzv
