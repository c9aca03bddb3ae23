#pragma once
// The client half of the TCPStore wire protocol, sans-IO: RequestEncoder writes requests in either
// dialect (spec/torchrun.md §5.3), ReplyDecoder reads replies incrementally as bytes arrive
// (replies have no header: the caller says what shape it expects). Used by TcpStoreClient.

#include "rendezvous/wire/encode.hpp"
#include "rendezvous/wire/protocol.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp::rdzv::wire {

using ByteVec = std::vector<std::uint8_t>;
using ByteSpan = std::span<const std::uint8_t>;
using Keys = std::vector<std::string>;
using KeyValues = std::vector<std::pair<std::string, ByteVec>>;

// Appends whole requests to a caller's buffer, so that several requests can go out in one write
// (WAIT then GET, VALIDATE then PING). Throws InternalError for a command the dialect lacks
// (VALIDATE and PING in kTorch113).
class RequestEncoder {
 public:
  explicit RequestEncoder(Dialect dialect) : dialect_(dialect) {}
  Dialect dialect() const { return dialect_; }

  // 2.x: 00 CE F7 85 3C
  void validate(ByteVec& out) const { request(out, Command::kValidate, kValidateMagic); }
  // 2.x: 0D + u32 nonce
  void ping(ByteVec& out, std::uint32_t nonce) const { request(out, Command::kPing, nonce); }
  void set(ByteVec& out, std::string_view key, ByteSpan value) const {
    request(out, Command::kSet, key, value);
  }
  void compare_set(ByteVec& out, std::string_view key, ByteSpan expected, ByteSpan desired) const {
    request(out, Command::kCompareSet, key, expected, desired);
  }
  void get(ByteVec& out, std::string_view key) const { request(out, Command::kGet, key); }
  void add(ByteVec& out, std::string_view key, std::int64_t delta) const {
    request(out, Command::kAdd, key, delta);
  }
  void check(ByteVec& out, const Keys& keys) const { request(out, Command::kCheck, keys); }
  void wait(ByteVec& out, const Keys& keys) const { request(out, Command::kWait, keys); }
  void get_num_keys(ByteVec& out) const { request(out, Command::kGetNumKeys); }
  void delete_key(ByteVec& out, std::string_view key) const {
    request(out, Command::kDeleteKey, key);
  }
  void append(ByteVec& out, std::string_view key, ByteSpan value) const {
    request(out, Command::kAppend, key, value);
  }
  void multi_get(ByteVec& out, const Keys& keys) const { request(out, Command::kMultiGet, keys); }
  void multi_set(ByteVec& out, const KeyValues& kvs) const {
    request(out, Command::kMultiSet, kvs);
  }
  void cancel_wait(ByteVec& out) const { request(out, Command::kCancelWait); }

 private:
  // The command's byte, then each field: a string or value (u64 length, bytes), an i64, a u32,
  // keys (u64 count, then each key) or key-value pairs (u64 count, then key, value for each).
  template <typename... Fields>
  void request(ByteVec& out, Command command, const Fields&... fields) const {
    out.push_back(byte_of(command));
    (put_field(out, fields), ...);
  }
  std::uint8_t byte_of(Command command) const;
  static void put_field(ByteVec& out, std::string_view text) { append_bytes(out, text); }
  static void put_field(ByteVec& out, ByteSpan value) { append_bytes(out, value); }
  static void put_field(ByteVec& out, std::int64_t value) { append_i64(out, value); }
  static void put_field(ByteVec& out, std::uint32_t value) { append_u32(out, value); }
  static void put_field(ByteVec& out, const Keys& keys);
  static void put_field(ByteVec& out, const KeyValues& kvs);

  Dialect dialect_;
};

// What a reply looks like: a u8 (CHECK, WAIT, CANCEL_WAIT), a u32 (PING), an i64 (ADD,
// GETNUMKEYS, DELETE_KEY), one value (GET, COMPARE_SET) or `count` values (MULTI_GET).
enum class ReplyShape : std::uint8_t { kU8, kU32, kI64, kValue, kValues };

enum class DecodeStatus : std::uint8_t { kNeedMore, kOk, kBad };

// Decodes one reply at a time. Usage: expect(shape); then consume() the bytes as they arrive until
// it returns kOk (read the result with u8()/u32()/i64()/take_value()/take_values()) or kBad
// (error() says why: a value length past max_value_bytes). Bytes past the end of the reply are
// left unconsumed for the next one.
class ReplyDecoder {
 public:
  explicit ReplyDecoder(std::size_t max_value_bytes = Limits{}.max_value_bytes)
      : max_value_bytes_(max_value_bytes) {}

  // Starts a new reply. REQUIRES: count >= 1 only matters for kValues (0 is a complete reply).
  void expect(ReplyShape shape, std::size_t count = 1);

  // Consumes a prefix of data; `used` is set to the number of bytes taken.
  DecodeStatus consume(ByteSpan data, std::size_t& used);

  std::uint8_t u8() const { return static_cast<std::uint8_t>(scalar_); }
  std::uint32_t u32() const { return static_cast<std::uint32_t>(scalar_); }
  std::int64_t i64() const { return static_cast<std::int64_t>(scalar_); }
  ByteVec take_value();
  std::vector<ByteVec> take_values() { return std::move(values_); }
  const std::string& error() const { return error_; }

 private:
  // Reads little-endian bytes into scalar_ until `width` are in; true when complete.
  bool fill_scalar(ByteSpan data, std::size_t& pos, std::size_t width);

  std::size_t max_value_bytes_;
  ReplyShape shape_ = ReplyShape::kU8;
  std::size_t values_left_ = 0;   // kValue/kValues: values still to read, current included
  bool in_body_ = false;          // reading a value's bytes (else its u64 length)
  std::uint64_t body_left_ = 0;   // bytes of the current value still to read
  std::uint64_t scalar_ = 0;
  std::size_t scalar_bytes_ = 0;  // bytes of scalar_ read so far
  std::vector<ByteVec> values_;
  std::string error_;
  bool done_ = false;
};

}  // namespace ddp::rdzv::wire
