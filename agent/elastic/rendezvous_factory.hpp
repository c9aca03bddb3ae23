#pragma once
// make_rendezvous: the Rendezvous backend a LaunchConfig asks for. static (one node, or
// --node_rank across nodes), c10d (elastic) and etcd (elastic, over an etcd v3 cluster). The
// rendezvous owns the store server when this node hosts it; workers reach it through
// RendezvousInfo::master_addr/master_port.

#include <boost/asio/io_context.hpp>

#include <memory>

#include "agent/cli/launch_config.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::agent {

// Throws ConfigError for options that are parsed but not usable (etcd TLS files under plain
// http, or files that cannot be loaded), IoError
// when a store this node must host cannot bind (naming the address and the owner of a taken
// port).
std::unique_ptr<rdzv::Rendezvous> make_rendezvous(const LaunchConfig& config,
                                                  boost::asio::io_context& io);

}  // namespace ddp::agent
