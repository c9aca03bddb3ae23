#pragma once
// The etcd rendezvous as the agent uses it: owns the etcd client and this node's worker store
// (a TcpStoreServer per round; the round uses group rank 0's), and runs EtcdRendezvous. On
// destruction (the agent ends, by a signal too) it revokes its lease, so the other nodes see
// this one leave at once rather than a TTL later.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/auth/credentials.hpp"
#include "rendezvous/etcd/etcd_client.hpp"
#include "rendezvous/etcd/etcd_settings.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv::etcd {

struct EtcdOptions {
  EtcdSettings settings;
  std::vector<Member> members;            // --rdzv_endpoint, in the order given
  std::optional<std::string> local_addr;  // --local_addr / rdzv_conf local_addr
  int rank_hint = -1;                     // --node_rank when given (EtcdNode::rank_hint)
  std::optional<TlsFiles> tls;            // protocol=https (cacert, cert, key)
  std::string user;                       // etcd user/password auth (rdzv_conf user=); "" none
  std::string password;                   // (rdzv_conf password_file=)
  // How long an operation retries while no member answers (the agent: min(read_timeout,
  // join_timeout)), and how long one member gets for one call.
  std::chrono::milliseconds failover_window{std::chrono::seconds(60)};
  std::chrono::milliseconds attempt_timeout{std::chrono::seconds(5)};
  // The round's workers' store and this agent's link store admit the round's nodes only
  // (docs/security.md); false: --rdzv_conf worker_store_allow=any.
  bool worker_store_members_only = true;
  // The job's secret (token file, or munge under SLURM): the agents authenticate to the link
  // store instead. Null: none.
  std::shared_ptr<const auth::Credentials> credentials;
};

// Throws IoError when no address routes to the first member, ConfigError when a TLS file cannot
// be used.
std::unique_ptr<Rendezvous> make_etcd_rendezvous(const EtcdOptions& options,
                                                 boost::asio::io_context& io);

}  // namespace ddp::rdzv::etcd
