#pragma once
// The debugging verbs of ddp-store (get, set, add, wait, num-keys, delete, compare-set): a
// redis-cli for any TCPStore server. main() dispatches every verb but "serve" here.

#include <string>
#include <vector>

namespace ddp::store_cli {

// True for a verb run_client_verb handles.
bool is_client_verb(const std::string& verb);

// Runs `verb` with its arguments (everything after the verb, e.g. {"--addr", "H:P", "key"}).
// Prints results on stdout; returns the process exit code (2 for bad arguments, with one line on
// stderr naming the argument; 1 for a store error naming host:port and the operation).
int run_client_verb(const std::string& verb, const std::vector<std::string>& args);

}  // namespace ddp::store_cli
