// ddprun-guard FD: the orphan guard's watchdog, started by ddprun on its end FD of a socket pair
// (agent/process/orphan_guard.hpp). Not meant to be run by hand.

#include <cstdio>
#include <optional>

#include "agent/process/orphan_watchdog.hpp"
#include "common/parse_number.hpp"

int main(int argc, char** argv) {
  const char* text = argc == 2 ? argv[1] : "";
  const std::optional<int> fd = ddp::parse_number<int>(text);
  if (!fd || *fd < 0) {
    std::fprintf(stderr, "ddprun-guard: started by ddprun with its socket descriptor (got '%s')\n",
                 text);
    return 2;
  }
  ddp::agent::watchdog::run(*fd);
}
