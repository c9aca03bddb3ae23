// ServerSession: one switch over the commands. Replies follow spec §5.3 byte for byte; where the
// dialects' servers differ we take the friendlier behaviour that no client can tell apart (a GET
// miss answers an empty value instead of closing; COMPARE_SET creating a key wakes its waiters),
// see docs/protocol.md. The 2.x queues, LIST_KEYS and BARRIER follow PyTorch's libuv server.

#include "rendezvous/store_server/server_session.hpp"

#include "ddp/error.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ddp::rdzv {

using wire::Command;

namespace {
constexpr std::size_t kScratchBytes = 4096;
// CHECK and WAIT count a non-empty 2.x queue as a present key, in both dialects (one table).
constexpr auto kPresence = KeyTable::Presence::kTableOrQueue;
}  // namespace

ServerSession::ServerSession(KeyTable& table, Send send, wire::Limits limits)
    : table_(&table), send_(std::move(send)), limits_(limits) {}

ServerSession::~ServerSession() { close(); }

void ServerSession::close() {
  if (table_ == nullptr) return;
  drop_pending_wait();
  for (auto id : watches_) table_->unwatch(id);
  watches_.clear();
  table_ = nullptr;
}

void ServerSession::drop_pending_wait() {
  if (pending_wait_) table_->cancel_wait(*pending_wait_);
  pending_wait_.reset();
}

void ServerSession::handle(wire::Request request, OutputQueue& out) {
  if (table_ == nullptr) throw Error("request on a closed store session");
  KeyTable& table = *table_;
  // Fixed-size fields go to `reply` (reused: no allocation per request), queued at the end;
  // GET and MULTI_GET values go to `out` uncopied.
  wire::Buffer& reply = scratch_;
  reply.clear();
  if (request.command != Command::kCancelWait) drop_pending_wait();
  auto& keys = request.keys;
  auto& values = request.values;
  switch (request.command) {
    case Command::kValidate:
      break;
    case Command::kPing:
      wire::append_u32(reply, request.word);
      break;
    case Command::kSet:
      table.set(keys[0], std::move(values[0]));
      break;
    case Command::kCompareSet:
      wire::append_bytes(reply, table.compare_set(keys[0], values[0], std::move(values[1])));
      break;
    case Command::kGet:
      out.append_value(table.share(keys[0]));
      break;
    case Command::kAdd:
      wire::append_i64(reply, table.add(keys[0], request.delta));
      break;
    case Command::kCheck:
      wire::append_u8(reply, static_cast<std::uint8_t>(table.contains_all(keys, kPresence)
                                                           ? wire::CheckResponse::kReady
                                                           : wire::CheckResponse::kNotReady));
      break;
    case Command::kWait:
      handle_wait(keys, reply);
      break;
    case Command::kGetNumKeys:
      wire::append_i64(reply, static_cast<std::int64_t>(table.size()));
      break;
    case Command::kWatchKey:
      handle_watch(keys[0], reply);
      break;
    case Command::kDeleteKey:
      wire::append_i64(reply, table.erase(keys[0]) ? 1 : 0);
      break;
    case Command::kAppend:
      // Checked again: another connection may have appended while this value arrived.
      if (auto why = append_refusal(keys[0], values[0].size()); !why.empty()) throw Error(why);
      table.append(keys[0], std::move(values[0]));
      break;
    case Command::kMultiGet:
      handle_multi_get(keys, out);
      break;
    case Command::kMultiSet:
      for (std::size_t i = 0; i < keys.size(); ++i) table.set(keys[i], std::move(values[i]));
      break;
    case Command::kCancelWait:
      // A wait that already completed sent STOP_WAITING first, as PyTorch's server does.
      drop_pending_wait();
      wire::append_u8(reply, static_cast<std::uint8_t>(wire::WaitResponse::kWaitCanceled));
      break;
    case Command::kQueuePush:
      table.queue_push(keys[0], std::move(values[0]));
      break;
    case Command::kQueuePop: {
      // The length before the pop, then the value when there was one.
      KeyTable::Popped popped = table.queue_pop(keys[0]);
      wire::append_i64(reply, static_cast<std::int64_t>(popped.length));
      out.append(reply);
      reply.clear();
      if (popped.length > 0) out.append_value(popped.value);
      break;
    }
    case Command::kQueueLen:
      wire::append_i64(reply, static_cast<std::int64_t>(table.queue_length(keys[0])));
      break;
    case Command::kListKeys:
      handle_list_keys(out);
      break;
    case Command::kBarrier:
      pending_wait_ = table.barrier(keys[0], request.delta, wake_on_stop());
      if (!pending_wait_) append_stop_waiting(reply);
      break;
  }
  out.append(reply);
  if (reply.capacity() > kScratchBytes) reply = {};  // after a large COMPARE_SET reply
}

std::string ServerSession::append_refusal(const std::string& key, std::uint64_t appended) const {
  const Bytes* current = table_ ? table_->find(key) : nullptr;
  const std::uint64_t size = current ? current->size() : 0;
  if (size + appended <= limits_.max_value_bytes) return "";
  return fmt::format("APPEND({}): {} + {} bytes exceed the value limit of {} bytes", key, size,
                     appended, limits_.max_value_bytes);
}

std::string ServerSession::refuse_value(const wire::Request& partial, std::uint64_t length) const {
  if (partial.command != Command::kAppend || partial.keys.empty()) return "";
  return append_refusal(partial.keys[0], length);
}

void ServerSession::handle_multi_get(const std::vector<std::string>& keys, OutputQueue& out) {
  // A reply is refused like a value past the limit: 1024 names of one 1 MiB key would otherwise
  // make the server queue 1 GiB for a client that may never read it.
  std::vector<SharedValue> values;
  values.reserve(keys.size());
  std::size_t total = 0;
  for (const auto& key : keys) {
    values.push_back(table_->share(key));
    total += wire::kLengthBytes + (values.back() ? values.back()->size() : 0);
  }
  if (total > limits_.max_value_bytes) {
    throw Error(fmt::format("MULTI_GET of {} keys: the reply of {} bytes exceeds the value limit "
                            "of {} bytes", keys.size(), total, limits_.max_value_bytes));
  }
  for (const auto& value : values) out.append_value(value);
}

void ServerSession::append_stop_waiting(wire::Buffer& out) {
  wire::append_u8(out, static_cast<std::uint8_t>(wire::WaitResponse::kStopWaiting));
}

KeyTable::WakeFn ServerSession::wake_on_stop() {
  return [this] {
    pending_wait_.reset();
    wire::Buffer stop;
    append_stop_waiting(stop);
    send_(std::move(stop));
  };
}

void ServerSession::handle_wait(const std::vector<std::string>& keys, wire::Buffer& reply) {
  pending_wait_ = table_->wait(keys, wake_on_stop(), kPresence);
  if (!pending_wait_) append_stop_waiting(reply);
}

void ServerSession::handle_list_keys(OutputQueue& out) {
  // Sorted, so the reply does not depend on the hash map's order; refused past the value limit
  // like a MULTI_GET reply, before anything is queued.
  std::vector<const std::string*> keys;
  keys.reserve(table_->size());
  std::size_t total = wire::kLengthBytes;
  table_->for_each_key([&](const std::string& key) {
    keys.push_back(&key);
    total += wire::kLengthBytes + key.size();
  });
  if (total > limits_.max_value_bytes) {
    throw Error(fmt::format("LIST_KEYS of {} keys: the reply of {} bytes exceeds the value limit "
                            "of {} bytes", keys.size(), total, limits_.max_value_bytes));
  }
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  wire::Buffer field;
  wire::append_i64(field, static_cast<std::int64_t>(keys.size()));
  out.append(field);
  for (const std::string* key : keys) {
    field.clear();
    wire::append_bytes(field, *key);
    out.append(field);
  }
}

void ServerSession::handle_watch(const std::string& key, wire::Buffer& reply) {
  if (watches_.size() >= limits_.max_keys_per_query) {
    throw Error(fmt::format("WATCH_KEY({}): more than {} watches on one connection", key,
                            limits_.max_keys_per_query));
  }
  watches_.push_back(table_->watch(key, [this](wire::WatchResponse type, const std::string& watched,
                                               const Bytes& old_value, const Bytes& new_value) {
    wire::Buffer event;  // u8 type, key, old value, new value
    wire::append_u8(event, static_cast<std::uint8_t>(type));
    wire::append_bytes(event, watched);
    wire::append_bytes(event, old_value);
    wire::append_bytes(event, new_value);
    send_(std::move(event));
  }));
  wire::append_u8(reply, static_cast<std::uint8_t>(wire::WatchResponse::kKeyCallbackRegistered));
}

}  // namespace ddp::rdzv
