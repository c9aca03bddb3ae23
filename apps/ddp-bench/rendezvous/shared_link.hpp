#pragma once
// SharedLink: how N simulated c10d members reach one store over two connections, because the
// store cannot hold one connection per member at 100,000 members (20,000 descriptors a process).
// Calls go one at a time over the calls connection, as on an agent's own connection. Waits go
// over the waits connection, and members that wait on the same keys share one WAIT there (a
// WAIT holds its connection until the keys exist, so it cannot share the calls connection).
// MemberStore is one member's Store on a link. Runs on one io_context; not thread-safe.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>
#include <unordered_map>

#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::bench {

namespace rdzv = ddp::rdzv;

class SharedLink {
 public:
  // Opens both connections; throws as TcpStoreClient::connect does.
  static rdzv::asio::awaitable<std::unique_ptr<SharedLink>> connect(std::string host,
                                                                    std::uint16_t port,
                                                                    rdzv::ConnectOptions options);
  ~SharedLink();

  rdzv::Store& calls() { return *calls_; }
  // Store::wait_for over the shared WAIT for these keys: true once they exist, false when this
  // caller's `timeout` passes first (other callers keep waiting). Throws the wait's error.
  rdzv::asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                       std::chrono::milliseconds timeout);

 private:
  struct Wait;
  SharedLink(rdzv::asio::any_io_executor executor, std::unique_ptr<rdzv::TcpStoreClient> calls,
             std::unique_ptr<rdzv::TcpStoreClient> waits);
  rdzv::asio::awaitable<void> run_wait(std::shared_ptr<Wait> wait, std::string id);

  rdzv::asio::any_io_executor executor_;
  std::unique_ptr<rdzv::TcpStoreClient> calls_;
  std::unique_ptr<rdzv::TcpStoreClient> waits_;
  std::unordered_map<std::string, std::shared_ptr<Wait>> pending_;  // by key list
};

// One member's Store on a shared link: every call but wait/wait_for goes to the calls
// connection; waits go to SharedLink::wait_for. The link must outlive it.
class MemberStore final : public rdzv::Store {
 public:
  explicit MemberStore(SharedLink& link);

  rdzv::asio::awaitable<void> set(std::string key, rdzv::Bytes value) override;
  rdzv::asio::awaitable<rdzv::Bytes> get(std::string key) override;
  rdzv::asio::awaitable<std::int64_t> add(std::string key, std::int64_t delta) override;
  rdzv::asio::awaitable<rdzv::Bytes> compare_set(std::string key, rdzv::Bytes expected,
                                                 rdzv::Bytes desired) override;
  rdzv::asio::awaitable<bool> check(std::vector<std::string> keys) override;
  using Store::wait;
  rdzv::asio::awaitable<void> wait(std::vector<std::string> keys,
                                   std::chrono::milliseconds timeout) override;
  rdzv::asio::awaitable<bool> wait_for(std::vector<std::string> keys,
                                       std::chrono::milliseconds timeout) override;
  rdzv::asio::awaitable<std::int64_t> num_keys() override;
  rdzv::asio::awaitable<bool> delete_key(std::string key) override;
  rdzv::asio::awaitable<void> append(std::string key, rdzv::Bytes value) override;
  rdzv::asio::awaitable<std::vector<rdzv::Bytes>> multi_get(
      std::vector<std::string> keys) override;
  rdzv::asio::awaitable<void> multi_set(
      std::vector<std::pair<std::string, rdzv::Bytes>> kvs) override;
  rdzv::asio::awaitable<std::vector<rdzv::Bytes>> multi_get_existing(
      std::vector<std::string> keys) override;

 private:
  SharedLink& link_;
};

}  // namespace ddp::bench
