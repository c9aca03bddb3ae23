// ddprun-guard FD: the orphan guard's watchdog, started by ddprun on its end FD of a socket pair
// (agent/orphan_guard.hpp). Not meant to be run by hand.

#include <charconv>
#include <cstdio>
#include <cstring>

#include "agent/orphan_watchdog.hpp"

int main(int argc, char** argv) {
  int fd = -1;
  const char* text = argc == 2 ? argv[1] : "";
  const char* end = text + std::strlen(text);
  const auto [stop, ec] = std::from_chars(text, end, fd);
  if (ec != std::errc{} || stop != end || fd < 0) {
    std::fprintf(stderr, "ddprun-guard: started by ddprun with its socket descriptor (got '%s')\n",
                 text);
    return 2;
  }
  ddp::agent::watchdog::run(fd);
}
