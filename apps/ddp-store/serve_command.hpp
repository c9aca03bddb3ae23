#pragma once
// `ddp-store serve`: a standalone TCPStore server (both PyTorch dialects) until SIGINT/SIGTERM.

#include <string>
#include <vector>

namespace ddp::store_cli {

// Runs the server with `args` (everything after "serve"); returns the exit code (0 after a
// signal, 2 for bad arguments, 1 when the address cannot be bound).
int run_serve(const std::vector<std::string>& args);

}  // namespace ddp::store_cli
