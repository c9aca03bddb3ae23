// slurm-probe: prints what detect_slurm finds in this process's environment, one key=value per
// line, or the ConfigError on stderr with exit code 2. Lets the tests check detection inside real
// srun tasks before (and independently of) a full ddprun launch.
#include <unistd.h>

#include <iostream>
#include <map>
#include <string>

#include "agent/slurm/slurm.hpp"
#include "ddp/error.hpp"

int main() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    std::size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  try {
    auto found = ddp::agent::detect_slurm(env);
    if (!found) {
      std::cout << "slurm=none\n";
      return 0;
    }
    std::cout << "nnodes=" << found->nnodes << " node_rank=" << found->node_rank
              << " master_addr=" << found->master_addr << " master_port=" << found->master_port
              << " run_id=" << found->run_id << '\n';
  } catch (const ddp::ConfigError& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  return 0;
}
