#pragma once
// TcpStoreServer: PyTorch's TCPStore server, both wire dialects (1.13 and 2.x, told apart on the
// first bytes of each connection), on the io_context it is given. One coroutine per connection,
// no per-request thread, no polling. Bad input closes only the offending connection, with one
// log line naming the peer.

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rendezvous/store_server/store_guard.hpp"
#include "rendezvous/wire/protocol.hpp"

namespace ddp::rdzv {

class MemoryStore;

// Every limit is described, with what happens at it, in docs/protocol.md ("Limits"). The wire
// limits (max_key_bytes, max_value_bytes: 1 GiB, as PyTorch checkpoints pass through, and
// max_keys_per_query) bound one request.
struct StoreLimits : wire::Limits {
  std::size_t max_connections = 1 << 20;
  // Past this many bytes of output queued for one client its requests are no longer read (its
  // replies still go out); output pushed to it past this (1.13 watch events) closes it.
  std::size_t max_queued_bytes = std::size_t{64} << 20;
  // A peer gone without a FIN is dropped within this (TCP keepalive); 0 turns keepalive off.
  std::chrono::seconds keepalive{60};
  // A connection holding part of a request that sends nothing more for this long is closed
  // (zero: never).
  std::chrono::milliseconds partial_request_timeout{std::chrono::seconds(60)};
  // A connection that must authenticate (StoreGuard) and has not within this is closed.
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};
};

class TcpStoreServer {
 public:
  // Binds host:port (port 0 picks a free port; "" or "0.0.0.0" any IPv4, "::" any IPv6) with
  // backlog SOMAXCONN and raises RLIMIT_NOFILE to its hard limit. Throws IoError naming the
  // address (and, where /proc shows it, the process that owns a taken port). `guard` says who
  // may use the store (store_guard.hpp); the default admits anyone, as PyTorch's TCPStore.
  TcpStoreServer(boost::asio::io_context& io, const std::string& host, std::uint16_t port,
                 StoreLimits limits = {}, StoreGuard guard = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Starts accepting (co_spawned on the io_context). Returns at once.
  void start();
  // Stops accepting and closes every connection. Idempotent.
  void stop();

  std::uint16_t port() const;
  std::size_t connection_count() const;
  // Output queued for all connections and not yet written (bounded by max_queued_bytes per
  // connection, plus the reply that crossed it).
  std::size_t queued_bytes() const;

  // The keys the server serves: in-process users (the agent, rendezvous on the store host) read
  // and write the same keys as the remote clients, without a socket.
  MemoryStore& store();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::rdzv
