#pragma once
// TcpStoreClient: a Store over one TCP connection in the 2.x wire dialect (the 1.13 dialect when
// asked). Calls are serialised on the connection; each has a deadline (Store::timeout()) and
// errors name host:port and the operation.

#include "rendezvous/store/store.hpp"
#include "rendezvous/store_client/connect_options.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace ddp::rdzv {

namespace detail {
class StoreConnection;
}

class TcpStoreClient final : public Store {
 public:
  // Connects with exponential backoff and jitter until options.connect_timeout; throws
  // TimeoutError "store at H:P unreachable after Ns: <last error>".
  static asio::awaitable<std::unique_ptr<TcpStoreClient>> connect(std::string host,
                                                                  std::uint16_t port,
                                                                  ConnectOptions options = {});
  // Closes the connection at once. Operations still in flight, and calls queued behind them,
  // throw IoError "store <op> failed at H:P: the client was destroyed" when the io_context next
  // runs them; none reconnects or touches the destroyed client.
  ~TcpStoreClient() override;

  asio::awaitable<void> set(std::string key, Bytes value) override;
  asio::awaitable<Bytes> get(std::string key) override;
  asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override;
  asio::awaitable<Bytes> compare_set(std::string key, Bytes expected, Bytes desired) override;
  asio::awaitable<bool> check(std::vector<std::string> keys) override;
  using Store::wait;
  asio::awaitable<void> wait(std::vector<std::string> keys,
                             std::chrono::milliseconds timeout) override;
  asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                 std::chrono::milliseconds timeout) override;
  asio::awaitable<std::int64_t> num_keys() override;
  asio::awaitable<bool> delete_key(std::string key) override;
  asio::awaitable<void> append(std::string key, Bytes value) override;
  asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) override;
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> keys) override;

  // "host:port", for messages.
  const std::string& address() const;

 private:
  explicit TcpStoreClient(std::shared_ptr<detail::StoreConnection> conn);
  // Shared with every operation in flight: a coroutine frame that outlives the client (an
  // io_context destroyed after it, or an operation failing after the destructor closed the
  // connection) still ends its call on a live connection.
  std::shared_ptr<detail::StoreConnection> conn_;
};

}  // namespace ddp::rdzv
