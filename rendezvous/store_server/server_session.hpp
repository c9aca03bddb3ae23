#pragma once
// ServerSession: what one store connection means, without the socket. It serves decoded
// requests on a KeyTable in the connection's dialect, parks the connection's WAIT, and sends
// wake-ups and 1.13 watch events through a callback when they happen.

#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store_server/server_output_queue.hpp"
#include "rendezvous/wire/encode.hpp"
#include "rendezvous/wire/protocol.hpp"
#include "rendezvous/wire/request.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace ddp::rdzv {

class ServerSession {
 public:
  // Output that happens later than the request: STOP_WAITING for a parked WAIT, watch events.
  using Send = std::function<void(wire::Buffer bytes)>;

  // limits.max_keys_per_query also bounds the WATCH_KEYs of one connection; max_value_bytes
  // bounds what APPEND may make a value and what one reply may carry.
  ServerSession(KeyTable& table, Send send, wire::Limits limits);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // Serves one request and appends its immediate reply (if it has one) to `reply`. A parked
  // WAIT or BARRIER that was never cancelled (1.13 clients give up silently) is dropped by the
  // next request other than CANCEL_WAIT. Throws ddp::Error when the request cannot be served
  // (ADD or BARRIER on a non-integer, too many watches, an APPEND or a reply (MULTI_GET,
  // LIST_KEYS) past the value limit): the connection must be closed.
  void handle(wire::Request request, OutputQueue& reply);

  // Why a value of `length` bytes announced in `partial` cannot be served ("" when it can): an
  // APPEND that would take its key past the value limit. For RequestParser::set_admit_value, so
  // that such a value is refused before its bytes are read.
  std::string refuse_value(const wire::Request& partial, std::uint64_t length) const;

  // Forgets the parked wait and every watch; the session never touches the table again.
  void close();

  bool is_waiting() const { return pending_wait_.has_value(); }

 private:
  // The callback a parked WAIT or BARRIER gets: it sends STOP_WAITING.
  KeyTable::WakeFn wake_on_stop();
  static void append_stop_waiting(wire::Buffer& out);
  void handle_wait(const std::vector<std::string>& keys, wire::Buffer& reply);
  void handle_list_keys(OutputQueue& out);
  void handle_watch(const std::string& key, wire::Buffer& reply);
  void handle_multi_get(const std::vector<std::string>& keys, OutputQueue& reply);
  std::string append_refusal(const std::string& key, std::uint64_t appended) const;
  void drop_pending_wait();

  KeyTable* table_;  // null once closed
  Send send_;
  wire::Limits limits_;
  std::optional<KeyTable::WaiterId> pending_wait_;
  std::vector<KeyTable::WatcherId> watches_;
  wire::Buffer scratch_;  // the fixed-size part of the reply being built
};

}  // namespace ddp::rdzv
