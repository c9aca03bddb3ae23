#pragma once
// The address of this host that peers can reach: the source address the kernel picks for a route
// toward the store's host (MASTER_ADDR), so that each node of a multi-node job advertises the
// interface that actually leads to the others.

#include <string>

namespace ddp::runtime {

// Numeric address (e.g. "10.213.0.11", "127.0.0.1"). Throws IoError naming `host` when it does
// not resolve or has no route.
std::string local_address_toward(const std::string& host, int port);

}  // namespace ddp::runtime
