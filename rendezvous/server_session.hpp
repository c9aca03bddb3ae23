#pragma once
// ServerSession: what one store connection means, without the socket. It serves decoded
// requests on a KeyTable in the connection's dialect, parks the connection's WAIT, and sends
// wake-ups and 1.13 watch events through a callback when they happen.

#include "rendezvous/server_key_table.hpp"
#include "rendezvous/wire/encode.hpp"
#include "rendezvous/wire/request.hpp"

#include <functional>
#include <optional>
#include <vector>

namespace ddp::rdzv {

class ServerSession {
 public:
  // Output that happens later than the request: STOP_WAITING for a parked WAIT, watch events.
  using Send = std::function<void(wire::Buffer bytes)>;

  ServerSession(KeyTable& table, Send send, std::size_t max_watches);
  ~ServerSession();
  ServerSession(const ServerSession&) = delete;
  ServerSession& operator=(const ServerSession&) = delete;

  // Serves one request and appends its immediate reply (if it has one) to `reply`. A parked
  // WAIT that was never cancelled (1.13 clients give up silently) is dropped by the next request
  // other than CANCEL_WAIT. Throws ddp::Error when the request cannot be served (ADD on a
  // non-integer, too many watches): the connection must be closed.
  void handle(wire::Request request, wire::Buffer& reply);

  // Forgets the parked wait and every watch; the session never touches the table again.
  void close();

  bool is_waiting() const { return pending_wait_.has_value(); }

 private:
  void handle_wait(const std::vector<std::string>& keys, wire::Buffer& reply);
  void handle_watch(const std::string& key, wire::Buffer& reply);
  void drop_pending_wait();

  KeyTable* table_;  // null once closed
  Send send_;
  std::size_t max_watches_;
  std::optional<KeyTable::WaiterId> pending_wait_;
  std::vector<KeyTable::WatcherId> watches_;
};

}  // namespace ddp::rdzv
