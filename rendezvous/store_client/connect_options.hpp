#pragma once
// ConnectOptions: how a store client connects (retries, deadlines, wire dialect, credentials).
// Apart from tcp_store_client.hpp so that BlockingStore::connect's callers need no Asio.

#include <chrono>
#include <memory>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/wire/protocol.hpp"

namespace ddp::rdzv {

using WireDialect = wire::Dialect;

struct ConnectOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(300)};  // total, all retries
  std::chrono::milliseconds initial_backoff{std::chrono::milliseconds(10)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(2)};  // exponential, with jitter
  std::chrono::milliseconds call_timeout{std::chrono::seconds(300)};
  WireDialect dialect = WireDialect::kTorch2;
  // What the client proves it holds (docs/security.md) before its first request; null: the
  // process default (auth::default_credentials(), set by an agent whose job has a secret), and
  // no handshake when that is null too. A server without a secret answers "not required" and the
  // connection goes on unauthenticated; one that refuses the tag fails the connect with
  // ConfigError naming the store (a wrong secret or run id is the user's to fix).
  std::shared_ptr<const auth::Credentials> credentials;
  // True: send ddprun's HELLO, with every address this node holds, even without credentials (an
  // agent to its job's rendezvous store, whose workers' stores admit those addresses). Only for
  // ddprun's own stores: a PyTorch server closes a connection that starts with a HELLO.
  bool report_addresses = false;
};

}  // namespace ddp::rdzv
