#pragma once
// The TCPStore wire protocol's constants (spec/torchrun.md §5): the command numbering of both
// dialects, the response bytes, the VALIDATE magic and the default size limits. Sans-IO: shared
// by the server's request parser and the client's encoder. docs/protocol.md explains the rest.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace ddp::rdzv::wire {

// Which numbering a connection speaks. kTorch113: no handshake, 1.13/2.0 numbering (SET = 0,
// WATCH_KEY = 7, and 2.0's APPEND..CANCEL_WAIT = 9..12). kTorch2: the first request is VALIDATE
// (00 + magic), then the 2.x numbering (SET = 1 ... PING = 13, the queues 14..16, LIST_KEYS = 17,
// BARRIER = 18).
enum class Dialect : std::uint8_t { kTorch113, kTorch2 };

// A command independent of its number on the wire.
enum class Command : std::uint8_t {
  kValidate,     // 2.x only: u32 magic; no reply
  kSet,          // key, value; no reply
  kCompareSet,   // key, expected, desired; reply: value
  kGet,          // key; reply: value
  kAdd,          // key, i64 delta; reply: i64
  kCheck,        // u64 n, n keys; reply: u8 CheckResponse
  kWait,         // u64 n, n keys; reply: u8 WaitResponse::kStopWaiting once all exist
  kGetNumKeys,   // nothing; reply: i64
  kWatchKey,     // 1.13 only: key; reply: u8 kKeyCallbackRegistered, then watch events
  kDeleteKey,    // key; reply: i64 deleted count (0 or 1)
  kAppend,       // key, value; no reply
  kMultiGet,     // u64 n, n keys; reply: n values
  kMultiSet,     // u64 n, n x (key, value); no reply
  kCancelWait,   // nothing; reply: u8 WaitResponse::kWaitCanceled
  kPing,         // 2.x only: u32 nonce; reply: the same u32
  kQueuePush,    // 2.x only: key, value; no reply
  kQueuePop,     // 2.x only: key; reply: i64 length before the pop, then (if > 0) the value
  kQueueLen,     // 2.x only: key; reply: i64
  kListKeys,     // 2.x only: nothing; reply: i64 n, then n keys
  kBarrier,      // 2.x only: key, i64 world_size; reply: u8 kStopWaiting once world_size arrived
};

// The 1.13 numbering (and 2.0's, before VALIDATE): a command's byte is its index, SET = 0,
// WATCH_KEY = 7. 1.13 itself stops at 8 (DELETE_KEY) and closes the connection on anything
// larger; 2.0 added 9..12.
inline constexpr Command kTorch113Commands[] = {
    Command::kSet,       Command::kCompareSet, Command::kGet,        Command::kAdd,
    Command::kCheck,     Command::kWait,       Command::kGetNumKeys, Command::kWatchKey,
    Command::kDeleteKey, Command::kAppend,     Command::kMultiGet,   Command::kMultiSet,
    Command::kCancelWait};

// The 2.x numbering with VALIDATE (2.6 .. 2.14 headers), VALIDATE = 0 ... PING = 13. 14..16
// (queues) came with the libuv server, 17..18 (LIST_KEYS, BARRIER) with the newest clients.
inline constexpr Command kTorch2Commands[] = {
    Command::kValidate,   Command::kSet,      Command::kCompareSet, Command::kGet,
    Command::kAdd,        Command::kCheck,    Command::kWait,       Command::kGetNumKeys,
    Command::kDeleteKey,  Command::kAppend,   Command::kMultiGet,   Command::kMultiSet,
    Command::kCancelWait, Command::kPing,     Command::kQueuePush,  Command::kQueuePop,
    Command::kQueueLen,   Command::kListKeys, Command::kBarrier};

// The commands of `dialect`, indexed by their byte.
constexpr std::span<const Command> commands_of(Dialect dialect) {
  if (dialect == Dialect::kTorch113) return kTorch113Commands;
  return kTorch2Commands;
}

// The command a byte means in `dialect`; nullopt for a byte that dialect does not define.
constexpr std::optional<Command> decode_command(Dialect dialect, std::uint8_t byte) {
  const auto commands = commands_of(dialect);
  if (byte < commands.size()) return commands[byte];
  return std::nullopt;
}

// The byte of `command` in `dialect`; nullopt when that dialect has no such command
// (VALIDATE, PING, the queues, LIST_KEYS and BARRIER in 1.13; WATCH_KEY in 2.x).
constexpr std::optional<std::uint8_t> encode_command(Dialect dialect, Command command) {
  const auto commands = commands_of(dialect);
  const auto it = std::find(commands.begin(), commands.end(), command);
  if (it == commands.end()) return std::nullopt;
  return static_cast<std::uint8_t>(it - commands.begin());
}

// u8 reply to CHECK.
enum class CheckResponse : std::uint8_t { kReady = 0, kNotReady = 1 };
// u8 reply to WAIT and BARRIER (kStopWaiting) and to CANCEL_WAIT (kWaitCanceled).
enum class WaitResponse : std::uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };
// u8 reply to WATCH_KEY (kKeyCallbackRegistered) and first byte of each later watch event:
// event = u8 type, key string, old value, new value (created: old empty; deleted: new empty).
enum class WatchResponse : std::uint8_t {
  kKeyUpdated = 0,
  kKeyCreated = 1,
  kKeyDeleted = 2,
  kKeyCallbackRegistered = 3,
  kKeyAppended = 4,  // 2.0 only
};

// VALIDATE's u32, sent little-endian: CE F7 85 3C.
inline constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;

// Integers (lengths, counts, i64 values, u32 magic/nonce) are little-endian; a string or value is
// a u64 length followed by that many bytes.
inline constexpr std::size_t kLengthBytes = 8;

// Limits on what one request may carry. A request past one is bad input: the connection closes.
struct Limits {
  std::size_t max_key_bytes = 4096;
  std::size_t max_value_bytes = std::size_t{1} << 30;  // 1 GiB
  std::size_t max_keys_per_query = 65536;
};

}  // namespace ddp::rdzv::wire
