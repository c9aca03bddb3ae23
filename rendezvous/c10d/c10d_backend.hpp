#pragma once
// C10dBackend: the c10d rendezvous as the agent uses it. Decides whether this agent hosts the
// rendezvous store (is_host, else "the endpoint is one of my addresses"), owns the
// TcpStoreServer or connects a TcpStoreClient (lazily, in the first next_round), opens a fresh
// worker store per round on the host, and runs C10dRendezvous over that store.

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/c10d/c10d_settings.hpp"
#include "rendezvous/job_guards.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

struct C10dOptions {
  C10dSettings settings;  // store_host/store_port are filled in by make_c10d_rendezvous
  std::string endpoint_host = "localhost";  // --rdzv_endpoint
  std::uint16_t endpoint_port = 29400;      // 0: any free port (hosts only, --standalone)
  std::optional<bool> is_host;              // rdzv_conf is_host; nullopt: address heuristic
  std::optional<std::string> local_addr;    // --local_addr / rdzv_conf local_addr
  int rank_hint = -1;                       // --node_rank when given (C10dNode::rank_hint)
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};  // every store call
  // The job secret and who the workers' stores admit (docs/security.md). The backend's own
  // clients present the credentials given here.
  JobSecurity security;
};

// Binds the store now when this node hosts it. Throws IoError when an explicit is_host=1 cannot
// bind (a heuristic host falls back to being a client, as torchrun does), or when no address
// routes to the endpoint.
std::unique_ptr<Rendezvous> make_c10d_rendezvous(const C10dOptions& options,
                                                 boost::asio::io_context& io);

}  // namespace ddp::rdzv
