// BlockingStore: each call spawns the TcpStoreClient coroutine on a private io_context and runs
// that context on the caller's thread, one handler at a time, until the coroutine completes
// (asio's blocking_tcp_client shape). The client's own deadlines bound every call, so run_one
// never blocks past Store::timeout().
#include "rendezvous/store_client/blocking_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <exception>
#include <optional>

#include "common/check.hpp"
#include "rendezvous/store/prefix_store.hpp"

namespace ddp::rdzv {

struct BlockingStore::Impl {
  // Runs `op` to completion on io; rethrows its exception.
  template <typename T>
  T run(asio::awaitable<T> op) {
    std::optional<T> result;
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T value) {
      error = e;
      if (!e) result.emplace(std::move(value));
      done = true;
    });
    drive(done);
    if (error) std::rethrow_exception(error);
    return std::move(*result);
  }

  void run(asio::awaitable<void> op) {
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(io, std::move(op), [&](std::exception_ptr e) {
      error = e;
      done = true;
    });
    drive(done);
    if (error) std::rethrow_exception(error);
  }

  void drive(const bool& done) {
    io.restart();
    while (!done) {
      DDP_CHECK(io.run_one() > 0, "blocking store io_context ran out of work mid-call");
    }
  }

  Store& store() { return prefixed ? static_cast<Store&>(*prefixed) : *client; }

  // Declared first so that it is destroyed last: handlers still queued on it (a late deadline
  // timer) are destroyed with it, after the client.
  asio::io_context io;
  std::unique_ptr<TcpStoreClient> client;
  std::unique_ptr<PrefixStore> prefixed;
  std::string prefix;
};

std::unique_ptr<BlockingStore> BlockingStore::connect(const std::string& host, std::uint16_t port,
                                                      ConnectOptions options, std::string prefix) {
  auto impl = std::make_unique<Impl>();
  impl->client = impl->run(TcpStoreClient::connect(host, port, options));
  impl->prefix = std::move(prefix);
  if (!impl->prefix.empty()) {
    impl->prefixed = std::make_unique<PrefixStore>(impl->prefix, *impl->client);
  }
  return std::unique_ptr<BlockingStore>(new BlockingStore(std::move(impl)));
}

BlockingStore::BlockingStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BlockingStore::~BlockingStore() = default;

void BlockingStore::set(const std::string& key, const Bytes& value) {
  impl_->run(impl_->store().set(key, value));
}

Bytes BlockingStore::get(const std::string& key) { return impl_->run(impl_->store().get(key)); }

std::int64_t BlockingStore::add(const std::string& key, std::int64_t delta) {
  return impl_->run(impl_->store().add(key, delta));
}

Bytes BlockingStore::compare_set(const std::string& key, const Bytes& expected,
                                 const Bytes& desired) {
  return impl_->run(impl_->store().compare_set(key, expected, desired));
}

bool BlockingStore::check(const std::vector<std::string>& keys) {
  return impl_->run(impl_->store().check(keys));
}

void BlockingStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }

void BlockingStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  impl_->run(impl_->store().wait(keys, timeout));
}

std::int64_t BlockingStore::num_keys() { return impl_->run(impl_->store().num_keys()); }

bool BlockingStore::delete_key(const std::string& key) {
  return impl_->run(impl_->store().delete_key(key));
}

void BlockingStore::append(const std::string& key, const Bytes& value) {
  impl_->run(impl_->store().append(key, value));
}

std::vector<Bytes> BlockingStore::multi_get(const std::vector<std::string>& keys) {
  return impl_->run(impl_->store().multi_get(keys));
}

void BlockingStore::multi_set(const std::vector<std::pair<std::string, Bytes>>& kvs) {
  impl_->run(impl_->store().multi_set(kvs));
}

std::chrono::milliseconds BlockingStore::timeout() const { return impl_->client->timeout(); }

// PrefixStore keeps a timeout of its own (for wait() without one), and passes calls with an
// explicit deadline through to the client, whose timeout bounds the rest: set both.
void BlockingStore::set_timeout(std::chrono::milliseconds timeout) {
  impl_->client->set_timeout(timeout);
  if (impl_->prefixed) impl_->prefixed->set_timeout(timeout);
}

const std::string& BlockingStore::address() const { return impl_->client->address(); }
const std::string& BlockingStore::prefix() const { return impl_->prefix; }

}  // namespace ddp::rdzv
