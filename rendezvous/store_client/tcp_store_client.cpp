// TcpStoreClient: the Store operations over one StoreConnection, as PyTorch's client performs
// them (get = WAIT then GET; wait cancels with CANCEL_WAIT on its deadline), with a deadline on
// every call and a transparent reconnect on the call after a failed one.
#include "rendezvous/store_client/tcp_store_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "ddp/error.hpp"
#include "rendezvous/store_client/store_connection.hpp"

namespace ddp::rdzv {
namespace {

using wire::ReplyShape;

// "a, b, c" (at most 4 keys, then "... (n keys)"): keys as they appear in messages.
std::string key_list(const std::vector<std::string>& keys) {
  constexpr std::size_t kShown = 4;
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += keys[i];
  }
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

}  // namespace

struct TcpStoreClient::Impl {
  Impl(asio::any_io_executor executor, std::string host, std::uint16_t port, ConnectOptions opts)
      : conn(executor, std::move(host), port, opts), turn(executor), dialect(opts.dialect) {
    turn.expires_at(asio::steady_timer::time_point::max());
  }

  // Waits for the connection (calls are serialised on it), reconnects it when an earlier call
  // failed, and starts the call's deadline. TcpStoreClient::call() pairs it with a Call.
  asio::awaitable<void> start(std::string what, std::chrono::milliseconds timeout) {
    while (busy && !conn.is_shut_down()) {
      co_await turn.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (conn.is_shut_down()) conn.throw_shut_down(what);
    busy = true;
    try {
      if (!conn.is_open()) co_await conn.open();
    } catch (...) {
      finish();
      throw;
    }
    conn.begin_call(std::move(what), timeout);
    out.clear();
  }

  void finish() {
    conn.end_call();
    busy = false;
    turn.cancel_one();
  }

  detail::StoreConnection conn;
  asio::steady_timer turn;  // a condition variable: callers waiting for the connection
  bool busy = false;
  WireDialect dialect;
  wire::ByteVec out;
};

// One call on the connection: it holds the connection and ends the call on every path out of an
// operation, exceptions included.
class TcpStoreClient::Call {
 public:
  explicit Call(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Call(Call&& other) noexcept = default;  // leaves `other` empty: only one end per call
  Call& operator=(Call&&) = delete;
  ~Call() {
    if (impl_) impl_->finish();
  }
  Impl* operator->() const { return impl_.get(); }

 private:
  std::shared_ptr<Impl> impl_;
};

asio::awaitable<TcpStoreClient::Call> TcpStoreClient::call(std::string what,
                                                           std::chrono::milliseconds deadline) {
  std::shared_ptr<Impl> impl = impl_;
  co_await impl->start(std::move(what), deadline);
  co_return Call(std::move(impl));
}

asio::awaitable<TcpStoreClient::Call> TcpStoreClient::call(std::string what) {
  return call(std::move(what), timeout());
}

asio::awaitable<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(std::string host,
                                                                        std::uint16_t port,
                                                                        ConnectOptions options) {
  auto executor = co_await asio::this_coro::executor;
  auto impl = std::make_shared<Impl>(executor, std::move(host), port, options);
  co_await impl->conn.open();
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(std::move(impl)));
  client->set_timeout(options.call_timeout);
  co_return client;
}

TcpStoreClient::TcpStoreClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

// What PyTorch's TCPStore does when deleted: the connection closes now, not when the last call in
// flight ends (a wait could hold it open for its whole timeout). The operations' frames keep
// Impl alive; each fails with IoError when it next resumes, and so does every call queued for
// the connection (woken here, so that none of them reconnects).
TcpStoreClient::~TcpStoreClient() {
  impl_->conn.shut_down();
  impl_->turn.cancel();
}

const std::string& TcpStoreClient::address() const { return impl_->conn.address(); }

asio::awaitable<void> TcpStoreClient::set(std::string key, Bytes value) {
  const Call c = co_await call(fmt::format("set({})", key));
  c->conn.encoder().set(c->out, key, value);
  co_await c->conn.send(c->out);
}

asio::awaitable<Bytes> TcpStoreClient::get(std::string key) {
  std::vector<std::string> keys{key};
  co_await wait(std::move(keys), timeout());
  const Call c = co_await call(fmt::format("get({})", key));
  c->conn.encoder().get(c->out, key);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kValue);
  co_return c->conn.reply().take_value();
}

asio::awaitable<std::int64_t> TcpStoreClient::add(std::string key, std::int64_t delta) {
  const Call c = co_await call(fmt::format("add({}, {})", key, delta));
  c->conn.encoder().add(c->out, key, delta);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kI64);
  co_return c->conn.reply().i64();
}

asio::awaitable<Bytes> TcpStoreClient::compare_set(std::string key, Bytes expected,
                                                   Bytes desired) {
  const Call c = co_await call(fmt::format("compare_set({})", key));
  c->conn.encoder().compare_set(c->out, key, expected, desired);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kValue);
  co_return c->conn.reply().take_value();
}

asio::awaitable<bool> TcpStoreClient::check(std::vector<std::string> keys) {
  const Call c = co_await call(fmt::format("check({})", key_list(keys)));
  c->conn.encoder().check(c->out, keys);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kU8);
  const auto reply = c->conn.reply().u8();
  if (reply > static_cast<std::uint8_t>(wire::CheckResponse::kNotReady)) {
    c->conn.throw_io(fmt::format("unexpected CHECK reply {}", reply));
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
  const Call c = co_await call(what, timeout);
  c->conn.encoder().wait(c->out, keys);
  co_await c->conn.send(c->out);
  const auto stop = static_cast<std::uint8_t>(wire::WaitResponse::kStopWaiting);
  const auto canceled = static_cast<std::uint8_t>(wire::WaitResponse::kWaitCanceled);
  const bool in_time = co_await c->conn.receive_or_deadline(ReplyShape::kU8);
  if (in_time) {
    if (c->conn.reply().u8() != stop) {
      c->conn.throw_io(fmt::format("unexpected WAIT reply {}", c->conn.reply().u8()));
    }
    co_return true;
  }
  if (c->dialect == WireDialect::kTorch113) {
    c->conn.close();
    co_return false;
  }
  c->conn.begin_call(what + " cancel", this->timeout());
  c->out.clear();
  c->conn.encoder().cancel_wait(c->out);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kU8);
  auto reply = c->conn.reply().u8();
  const bool keys_arrived = reply == stop;
  if (keys_arrived) {
    co_await c->conn.receive(ReplyShape::kU8);
    reply = c->conn.reply().u8();
  }
  if (reply != canceled) c->conn.throw_io(fmt::format("unexpected CANCEL_WAIT reply {}", reply));
  co_return keys_arrived;
}

asio::awaitable<std::int64_t> TcpStoreClient::num_keys() {
  const Call c = co_await call("num_keys()");
  c->conn.encoder().get_num_keys(c->out);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kI64);
  co_return c->conn.reply().i64();
}

asio::awaitable<bool> TcpStoreClient::delete_key(std::string key) {
  const Call c = co_await call(fmt::format("delete_key({})", key));
  c->conn.encoder().delete_key(c->out, key);
  co_await c->conn.send(c->out);
  co_await c->conn.receive(ReplyShape::kI64);
  co_return c->conn.reply().i64() > 0;
}

// In the 1.13 dialect this sends 2.0's APPEND (9), which ddp-store serves; PyTorch 1.13's own
// server has no APPEND and closes the connection.
asio::awaitable<void> TcpStoreClient::append(std::string key, Bytes value) {
  const Call c = co_await call(fmt::format("append({})", key));
  c->conn.encoder().append(c->out, key, value);
  co_await c->conn.send(c->out);
}

// WAIT on every key, then MULTI_GET (multi_get_existing).
asio::awaitable<std::vector<Bytes>> TcpStoreClient::multi_get(std::vector<std::string> keys) {
  co_await wait(keys, timeout());
  co_return co_await multi_get_existing(std::move(keys));
}

// MULTI_GET alone; the 1.13 dialect (whose server has no MULTI_GET) pipelines one GET per key in
// a single write instead.
asio::awaitable<std::vector<Bytes>> TcpStoreClient::multi_get_existing(
    std::vector<std::string> keys) {
  const Call c = co_await call(fmt::format("multi_get({})", key_list(keys)));
  if (c->dialect == WireDialect::kTorch2) {
    c->conn.encoder().multi_get(c->out, keys);
    co_await c->conn.send(c->out);
    co_await c->conn.receive(ReplyShape::kValues, keys.size());
    co_return c->conn.reply().take_values();
  }
  for (const auto& key : keys) c->conn.encoder().get(c->out, key);
  co_await c->conn.send(c->out);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    co_await c->conn.receive(ReplyShape::kValue);
    values.push_back(c->conn.reply().take_value());
  }
  co_return values;
}

// MULTI_SET, or in the 1.13 dialect one SET per key in a single write.
asio::awaitable<void> TcpStoreClient::multi_set(std::vector<std::pair<std::string, Bytes>> kvs) {
  std::vector<std::string> keys;
  for (const auto& kv : kvs) keys.push_back(kv.first);
  const Call c = co_await call(fmt::format("multi_set({})", key_list(keys)));
  if (c->dialect == WireDialect::kTorch2) {
    c->conn.encoder().multi_set(c->out, kvs);
  } else {
    for (const auto& [key, value] : kvs) c->conn.encoder().set(c->out, key, value);
  }
  co_await c->conn.send(c->out);
}

}  // namespace ddp::rdzv
