// ddp-store: a standalone TCPStore server (`serve`) and redis-cli-like debugging verbs against any
// TCPStore server (get, set, add, wait, num-keys, ...; apps/ddp-store/client_verbs.hpp).

#include "apps/ddp-store/client_verbs.hpp"
#include "apps/ddp-store/serve_command.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage =
    "usage: ddp-store <verb> [args...]\n"
    "  serve --host H --port P    run a store (PyTorch 1.13 and 2.x TCPStore clients);\n"
    "                             prints 'listening on H:P' once it accepts;\n"
    "                             --metrics_port M serves Prometheus metrics on M\n"
    "  get|set|add|wait|num-keys|delete|compare-set --addr H:P ...\n"
    "                             talk to any TCPStore server\n"
    "run 'ddp-store <verb> --help' for a verb's options\n";

int run_client(const std::string& verb, const std::vector<std::string>& args);

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string& verb = all.front();
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::vector<std::string> args(all.begin() + 1, all.end());
  if (verb == "serve") return ddp::store_cli::run_serve(args);
  return run_client(verb, args);
}

namespace {

int run_client(const std::string& verb, const std::vector<std::string>& args) {
  if (ddp::store_cli::is_client_verb(verb)) return ddp::store_cli::run_client_verb(verb, args);
  std::fprintf(stderr, "ddp-store: unknown verb '%s'\n%s", verb.c_str(), kUsage);
  return 2;
}

}  // namespace
