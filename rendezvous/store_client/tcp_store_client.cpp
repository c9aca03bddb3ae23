// TcpStoreClient: the Store operations over one StoreConnection, as PyTorch's client performs
// them (get = WAIT then GET; wait cancels with CANCEL_WAIT on its deadline), with a deadline on
// every call and a transparent reconnect on the call after a failed one.
#include "rendezvous/store_client/tcp_store_client.hpp"

#include <fmt/format.h>

#include <boost/asio/this_coro.hpp>

#include "ddp/error.hpp"
#include "rendezvous/store_client/store_connection.hpp"

namespace ddp::rdzv {
namespace {

using detail::StoreConnection;
using wire::ReplyShape;

// "a, b, c" (at most 4 keys, then "... (n keys)"): keys as they appear in messages.
std::string key_list(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 4;
  const auto shown = static_cast<std::ptrdiff_t>(std::min(keys.size(), kShown));
  std::string out = fmt::format("{}", fmt::join(keys.begin(), keys.begin() + shown, ", "));
  if (keys.size() > kShown) out += fmt::format(", ... ({} keys)", keys.size());
  return out;
}

// (Built outside the coroutine: inside it, GCC 12 compiled this throw into an illegal
// instruction.)
TimeoutError wait_timeout(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                          const std::string& address) {
  return TimeoutError(fmt::format("store wait({}) timed out after {} at {}", key_list(keys),
                                  detail::format_duration(timeout), address));
}

// One call on the connection: it holds the connection and finishes the call on every path out
// of an operation, exceptions included.
class Call {
 public:
  explicit Call(std::shared_ptr<StoreConnection> conn) : conn_(std::move(conn)) {}
  Call(Call&& other) noexcept = default;  // leaves `other` empty: only one finish per call
  Call& operator=(Call&&) = delete;
  ~Call() {
    if (conn_) conn_->finish_call();
  }
  StoreConnection* operator->() const { return conn_.get(); }

 private:
  std::shared_ptr<StoreConnection> conn_;
};

// Waits for the connection and starts a call named `what` with a deadline `timeout` from now.
asio::awaitable<Call> call(std::shared_ptr<StoreConnection> conn, std::string what,
                           std::chrono::milliseconds timeout) {
  co_await conn->start_call(std::move(what), timeout);
  co_return Call(std::move(conn));
}

}  // namespace

asio::awaitable<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(std::string host,
                                                                        std::uint16_t port,
                                                                        ConnectOptions options) {
  auto executor = co_await asio::this_coro::executor;
  auto conn = std::make_shared<StoreConnection>(executor, std::move(host), port, options);
  co_await conn->open();
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(std::move(conn)));
  client->set_timeout(options.call_timeout);
  co_return client;
}

TcpStoreClient::TcpStoreClient(std::shared_ptr<StoreConnection> conn) : conn_(std::move(conn)) {}

// What PyTorch's TCPStore does when deleted: the connection closes now, not when the last call in
// flight ends (a wait could hold it open for its whole timeout). The operations' frames keep the
// connection alive; each fails with IoError when it next resumes, and so does every call queued
// for the connection (none of them reconnects).
TcpStoreClient::~TcpStoreClient() { conn_->shut_down(); }

const std::string& TcpStoreClient::address() const { return conn_->address(); }

asio::awaitable<void> TcpStoreClient::set(std::string key, Bytes value) {
  const Call c = co_await call(conn_, fmt::format("set({})", key), timeout());
  c->encoder().set(c->request(), key, value);
  co_await c->send(c->request());
}

asio::awaitable<Bytes> TcpStoreClient::get(std::string key) {
  std::vector<std::string> keys{key};
  co_await wait(std::move(keys), timeout());
  const Call c = co_await call(conn_, fmt::format("get({})", key), timeout());
  c->encoder().get(c->request(), key);
  co_await c->exchange(ReplyShape::kValue);
  co_return c->reply().take_value();
}

asio::awaitable<std::int64_t> TcpStoreClient::add(std::string key, std::int64_t delta) {
  const Call c = co_await call(conn_, fmt::format("add({}, {})", key, delta), timeout());
  c->encoder().add(c->request(), key, delta);
  co_await c->exchange(ReplyShape::kI64);
  co_return c->reply().i64();
}

asio::awaitable<Bytes> TcpStoreClient::compare_set(std::string key, Bytes expected,
                                                   Bytes desired) {
  const Call c = co_await call(conn_, fmt::format("compare_set({})", key), timeout());
  c->encoder().compare_set(c->request(), key, expected, desired);
  co_await c->exchange(ReplyShape::kValue);
  co_return c->reply().take_value();
}

asio::awaitable<bool> TcpStoreClient::check(std::vector<std::string> keys) {
  const Call c = co_await call(conn_, fmt::format("check({})", key_list(keys)), timeout());
  c->encoder().check(c->request(), keys);
  co_await c->exchange(ReplyShape::kU8);
  const auto reply = c->reply().u8();
  if (reply > static_cast<std::uint8_t>(wire::CheckResponse::kNotReady)) {
    c->throw_io(fmt::format("unexpected CHECK reply {}", reply));
  }
  co_return reply == static_cast<std::uint8_t>(wire::CheckResponse::kReady);
}

// PyTorch 2.x's doWait: WAIT, then STOP_WAITING; on the deadline send CANCEL_WAIT and read
// WAIT_CANCELED, which may be preceded by a STOP_WAITING that raced the cancel. PyTorch raises even
// then; we return, since every key does exist. The 1.13 dialect has no CANCEL_WAIT: the server
// keeps the wait and would push a stray STOP_WAITING into a later reply, so the connection is
// closed instead (the next call reconnects, and the server forgets the waits of a closed socket).
asio::awaitable<void> TcpStoreClient::wait(std::vector<std::string> keys,
                                           std::chrono::milliseconds timeout) {
  const bool arrived = co_await wait_for(keys, timeout);
  if (!arrived) throw wait_timeout(keys, timeout, address());
}

asio::awaitable<bool> TcpStoreClient::wait_for(std::vector<std::string> keys,
                                               std::chrono::milliseconds timeout) {
  const auto what = fmt::format("wait({})", key_list(keys));
  const Call c = co_await call(conn_, what, timeout);
  c->encoder().wait(c->request(), keys);
  co_await c->send(c->request());
  const auto stop = static_cast<std::uint8_t>(wire::WaitResponse::kStopWaiting);
  const auto canceled = static_cast<std::uint8_t>(wire::WaitResponse::kWaitCanceled);
  const bool in_time = co_await c->receive_or_deadline(ReplyShape::kU8);
  if (in_time) {
    if (c->reply().u8() != stop) {
      c->throw_io(fmt::format("unexpected WAIT reply {}", c->reply().u8()));
    }
    co_return true;
  }
  if (c->encoder().dialect() == WireDialect::kTorch113) {
    c->close();
    co_return false;
  }
  c->begin_call(what + " cancel", this->timeout());
  c->request().clear();
  c->encoder().cancel_wait(c->request());
  co_await c->exchange(ReplyShape::kU8);
  auto reply = c->reply().u8();
  const bool keys_arrived = reply == stop;
  if (keys_arrived) {
    co_await c->receive(ReplyShape::kU8);
    reply = c->reply().u8();
  }
  if (reply != canceled) c->throw_io(fmt::format("unexpected CANCEL_WAIT reply {}", reply));
  co_return keys_arrived;
}

asio::awaitable<std::int64_t> TcpStoreClient::num_keys() {
  const Call c = co_await call(conn_, "num_keys()", timeout());
  c->encoder().get_num_keys(c->request());
  co_await c->exchange(ReplyShape::kI64);
  co_return c->reply().i64();
}

asio::awaitable<bool> TcpStoreClient::delete_key(std::string key) {
  const Call c = co_await call(conn_, fmt::format("delete_key({})", key), timeout());
  c->encoder().delete_key(c->request(), key);
  co_await c->exchange(ReplyShape::kI64);
  co_return c->reply().i64() > 0;
}

// In the 1.13 dialect this sends 2.0's APPEND (9), which ddp-store serves; PyTorch 1.13's own
// server has no APPEND and closes the connection.
asio::awaitable<void> TcpStoreClient::append(std::string key, Bytes value) {
  const Call c = co_await call(conn_, fmt::format("append({})", key), timeout());
  c->encoder().append(c->request(), key, value);
  co_await c->send(c->request());
}

// MULTI_GET alone; the 1.13 dialect (whose server has no MULTI_GET) pipelines one GET per key in
// a single write instead.
asio::awaitable<std::vector<Bytes>> TcpStoreClient::multi_get_existing(
    std::vector<std::string> keys) {
  const Call c = co_await call(conn_, fmt::format("multi_get({})", key_list(keys)), timeout());
  if (c->encoder().dialect() == WireDialect::kTorch2) {
    c->encoder().multi_get(c->request(), keys);
    co_await c->exchange(ReplyShape::kValues, keys.size());
    co_return c->reply().take_values();
  }
  for (const auto& key : keys) c->encoder().get(c->request(), key);
  co_await c->send(c->request());
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    co_await c->receive(ReplyShape::kValue);
    values.push_back(c->reply().take_value());
  }
  co_return values;
}

// MULTI_SET, or in the 1.13 dialect one SET per key in a single write.
asio::awaitable<void> TcpStoreClient::multi_set(std::vector<std::pair<std::string, Bytes>> kvs) {
  std::vector<std::string> keys;
  for (const auto& kv : kvs) keys.push_back(kv.first);
  const Call c = co_await call(conn_, fmt::format("multi_set({})", key_list(keys)), timeout());
  if (c->encoder().dialect() == WireDialect::kTorch2) {
    c->encoder().multi_set(c->request(), kvs);
  } else {
    for (const auto& [key, value] : kvs) c->encoder().set(c->request(), key, value);
  }
  co_await c->send(c->request());
}

}  // namespace ddp::rdzv
