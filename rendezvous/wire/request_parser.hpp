#pragma once
// RequestParser: an incremental, sans-IO parser of TCPStore requests for one connection. It tells
// the dialect from the first bytes (spec §5.8), accepts bytes in chunks of any size and never
// allocates more than the bytes it was given plus the limits allow.

#include "rendezvous/wire/protocol.hpp"
#include "rendezvous/wire/request.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace ddp::rdzv::wire {

enum class ParseStatus { kNeedMore, kOk, kBad };

struct ParseResult {
  ParseStatus status;
  std::size_t consumed;  // bytes of the input used; the rest belongs to later requests
};

class RequestParser {
 public:
  explicit RequestParser(Limits limits = {});

  // Consumes bytes of `data` up to the end of one request. kOk: take_request() holds it.
  // kNeedMore: every byte was consumed and more are needed. kBad: error() says why; the
  // connection must be closed (the parser stays bad).
  ParseResult feed(std::span<const std::uint8_t> data);

  // Called with the request so far (its command and keys) and a value's announced length, after
  // the length passed the limits and before any of its bytes are read: a non-empty answer is why
  // the value cannot be accepted, and makes the input bad (kBad, error() says it).
  using AdmitValue = std::function<std::string(const Request& partial, std::uint64_t length)>;
  void set_admit_value(AdmitValue admit) { admit_value_ = std::move(admit); }

  // The request completed by the last kOk; resets the parser for the next one.
  Request take_request();

  // The dialect, once the first bytes told it.
  std::optional<Dialect> dialect() const { return dialect_; }
  // Why the input is bad, e.g. "key length 5000 exceeds the limit of 4096 bytes".
  const std::string& error() const { return error_; }
  // True between requests (no partial request buffered).
  bool is_idle() const { return step_ == Step::kCommand && scratch_used_ == 0; }

 private:
  enum class Step {
    kCommand,     // the command byte (the first one also decides the dialect)
    kSniff,       // 1 + 4 bytes after a leading 0x00: VALIDATE magic or a 1.13 SET
    kWord,        // u32: VALIDATE magic, PING nonce
    kCount,       // u64 number of keys
    kKeyLength,   // u64
    kKeyBytes,
    kValueLength, // u64
    kValueBytes,
    kDelta,       // i64
    kDone,
    kBad,
  };

  bool fill_scratch(std::span<const std::uint8_t> data, std::size_t& pos, std::size_t want);
  void after_field();
  Step next_field_step() const;

  Limits limits_;
  std::optional<Dialect> dialect_;
  Request request_;
  Step step_ = Step::kCommand;
  std::uint8_t scratch_[8] = {};
  std::size_t scratch_used_ = 0;
  std::size_t fields_done_ = 0;  // fields of the current request read so far
  std::uint64_t count_ = 0;      // keys announced by CHECK/WAIT/MULTI_GET/MULTI_SET
  std::uint64_t remaining_ = 0;  // bytes still to copy into the current key or value
  std::string error_;
  AdmitValue admit_value_;
};

}  // namespace ddp::rdzv::wire
