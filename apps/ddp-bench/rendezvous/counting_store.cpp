// Request bytes come from the client's own encoder, so they are the bytes TcpStoreClient writes;
// reply bytes follow each reply's shape (u8, i64, or a u64 length and the value).

#include "apps/ddp-bench/rendezvous/counting_store.hpp"

#include <fmt/format.h>

#include "ddp/error.hpp"
#include "rendezvous/wire/client_codec.hpp"

namespace ddp::bench {
namespace {

namespace wire = rdzv::wire;

const wire::RequestEncoder& encoder() {
  static const wire::RequestEncoder kEncoder(wire::Dialect::kTorch2);
  return kEncoder;
}

constexpr std::int64_t kU8 = 1;
constexpr std::int64_t kI64 = 8;
std::int64_t value_reply(const rdzv::Bytes& value) {
  return 8 + static_cast<std::int64_t>(value.size());
}

// The bytes of the request `encode` writes: one scratch buffer (a shard is one thread), so that
// counting allocates nothing per request.
template <class Encode>
std::int64_t request_bytes(Encode encode) {
  static wire::ByteVec out;
  out.clear();
  encode(out);
  return static_cast<std::int64_t>(out.size());
}

// Adds one request of `bytes` on the wire and its reply of `reply` bytes.
void count(WireCounts& counts, std::int64_t bytes, std::int64_t reply) {
  ++counts.requests;
  counts.request_bytes += bytes;
  counts.reply_bytes += reply;
}

// (Built outside the coroutine: GCC 12 miscompiles some throws inside them.)
TimeoutError wait_timeout(const std::vector<std::string>& keys,
                          std::chrono::milliseconds timeout) {
  return TimeoutError(fmt::format("store wait({} keys, first {}) timed out after {} ms",
                                  keys.size(), keys.empty() ? "" : keys[0], timeout.count()));
}

}  // namespace

WireCounts& WireCounts::operator+=(const WireCounts& o) {
  requests += o.requests;
  request_bytes += o.request_bytes;
  reply_bytes += o.reply_bytes;
  return *this;
}

WireCounts operator-(WireCounts a, const WireCounts& b) {
  a.requests -= b.requests;
  a.request_bytes -= b.request_bytes;
  a.reply_bytes -= b.reply_bytes;
  return a;
}

CountingStore::CountingStore(rdzv::Store& inner, WireCounts& counts)
    : inner_(inner), counts_(counts) {
  set_timeout(inner.timeout());
}

void CountingStore::count_wait(const std::vector<std::string>& keys, bool timed_out) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().wait(out, keys); }), kU8);
  if (timed_out) {
    count(counts_, request_bytes([](wire::ByteVec& out) { encoder().cancel_wait(out); }), kU8);
  }
}

// Calls whose reply does not depend on the result are counted before they go out and return the
// inner store's operation itself (no frame of their own: a heartbeat is one of them).
rdzv::asio::awaitable<void> CountingStore::set(std::string key, rdzv::Bytes value) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().set(out, key, value); }), 0);
  return inner_.set(std::move(key), std::move(value));
}

rdzv::asio::awaitable<rdzv::Bytes> CountingStore::get(std::string key) {
  count_wait(std::vector<std::string>(1, key), false);
  const auto bytes = request_bytes([&](wire::ByteVec& out) { encoder().get(out, key); });
  rdzv::Bytes value = co_await inner_.get(std::move(key));
  count(counts_, bytes, value_reply(value));
  co_return value;
}

rdzv::asio::awaitable<std::int64_t> CountingStore::add(std::string key, std::int64_t delta) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().add(out, key, delta); }),
        kI64);
  return inner_.add(std::move(key), delta);
}

rdzv::asio::awaitable<rdzv::Bytes> CountingStore::compare_set(std::string key,
                                                              rdzv::Bytes expected,
                                                              rdzv::Bytes desired) {
  const auto bytes = request_bytes(
      [&](wire::ByteVec& out) { encoder().compare_set(out, key, expected, desired); });
  rdzv::Bytes stored =
      co_await inner_.compare_set(std::move(key), std::move(expected), std::move(desired));
  count(counts_, bytes, value_reply(stored));
  co_return stored;
}

rdzv::asio::awaitable<bool> CountingStore::check(std::vector<std::string> keys) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().check(out, keys); }), kU8);
  return inner_.check(std::move(keys));
}

rdzv::asio::awaitable<void> CountingStore::wait(std::vector<std::string> keys,
                                                std::chrono::milliseconds timeout) {
  const bool present = co_await wait_for(keys, timeout);
  if (!present) throw wait_timeout(keys, timeout);
}

rdzv::asio::awaitable<bool> CountingStore::wait_for(std::vector<std::string> keys,
                                                    std::chrono::milliseconds timeout) {
  const std::vector<std::string> counted = keys;
  const bool arrived = co_await inner_.wait_for(std::move(keys), timeout);
  count_wait(counted, !arrived);
  co_return arrived;
}

rdzv::asio::awaitable<std::int64_t> CountingStore::num_keys() {
  count(counts_, request_bytes([](wire::ByteVec& out) { encoder().get_num_keys(out); }), kI64);
  return inner_.num_keys();
}

rdzv::asio::awaitable<bool> CountingStore::delete_key(std::string key) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().delete_key(out, key); }),
        kI64);
  return inner_.delete_key(std::move(key));
}

rdzv::asio::awaitable<void> CountingStore::append(std::string key, rdzv::Bytes value) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().append(out, key, value); }),
        0);
  return inner_.append(std::move(key), std::move(value));
}

rdzv::asio::awaitable<std::vector<rdzv::Bytes>> CountingStore::multi_get(
    std::vector<std::string> keys) {
  count_wait(keys, false);
  co_return co_await counted_multi_get(std::move(keys), true);
}

rdzv::asio::awaitable<std::vector<rdzv::Bytes>> CountingStore::multi_get_existing(
    std::vector<std::string> keys) {
  return counted_multi_get(std::move(keys), false);
}

rdzv::asio::awaitable<std::vector<rdzv::Bytes>> CountingStore::counted_multi_get(
    std::vector<std::string> keys, bool wait_first) {
  const auto bytes = request_bytes([&](wire::ByteVec& out) { encoder().multi_get(out, keys); });
  std::vector<rdzv::Bytes> values;
  if (wait_first) {
    values = co_await inner_.multi_get(std::move(keys));
  } else {
    values = co_await inner_.multi_get_existing(std::move(keys));
  }
  std::int64_t reply = 0;
  for (const auto& value : values) reply += value_reply(value);
  count(counts_, bytes, reply);
  co_return values;
}

rdzv::asio::awaitable<void> CountingStore::multi_set(
    std::vector<std::pair<std::string, rdzv::Bytes>> kvs) {
  count(counts_, request_bytes([&](wire::ByteVec& out) { encoder().multi_set(out, kvs); }), 0);
  return inner_.multi_set(std::move(kvs));
}

}  // namespace ddp::bench
