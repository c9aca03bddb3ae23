// The CPUs this process may use, for the NUMA plan (sched_getaffinity; the one syscall of
// numa_binding). Applying a plan happens in the spawned child: process_spawner_linux.cpp.

#include <sched.h>

#include "agent/cli/numa_binding.hpp"

namespace ddp::agent {

std::set<int> allowed_cpus_of_this_process() {
  std::set<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  }
  return cpus;
}

}  // namespace ddp::agent
