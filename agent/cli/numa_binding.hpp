#pragma once
// --numa_binding (torchrun 2.8's modes): which CPUs each local worker may run on, from the sysfs
// topology (GPU -> NUMA node for GPU workers, an even split of the NUMA nodes otherwise). The
// plan is computed before any worker is spawned; the spawner applies it between fork and exec.

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/launch_config.hpp"
#include "agent/core/worker_spec.hpp"  // NumaBinding

namespace ddp::agent {

// What the plan needs from /sys, CPUs limited to those this process may use.
struct NumaTopology {
  std::map<int, std::set<int>> node_cpus;  // NUMA node -> its allowed CPUs (nodes without any: out)
  std::map<int, int> cpu_package;          // CPU -> physical_package_id (socket)
  std::map<int, int> cpu_core;             // CPU -> lowest CPU of its thread siblings (the core)
  std::map<int, int> cpu_cache;            // CPU -> lowest CPU sharing its last-level cache
  std::vector<int> gpu_nodes;              // NVIDIA GPUs in PCI bus order -> their NUMA node
};

// Reads `sysfs_root` (normally "/sys"; tests pass a fake tree): devices/system/node/node<N>/
// cpulist, devices/system/cpu/cpu<N>/topology/{physical_package_id,thread_siblings_list},
// devices/system/cpu/cpu<N>/cache/index<I>/{type,level,shared_cpu_list}, and
// bus/pci/devices/<addr>/{vendor,class,numa_node} for NVIDIA GPUs. Missing CPU files leave
// their maps without the CPU; a node's numa_node of -1 reads as 0.
NumaTopology read_numa_topology(const std::string& sysfs_root, const std::set<int>& allowed_cpus);

// The placement of local ranks 0..nproc-1 under `mode` (node, socket, exclusive, core-complex).
// GPU workers (the topology has a GPU for every local rank, after `visible_gpus`: the parent's
// CUDA_VISIBLE_DEVICES as indices, empty for all) use their GPU's node; otherwise local rank r
// gets node r*N/nproc of the N nodes. Throws ConfigError naming --numa_binding when there is no
// NUMA node or a node has fewer cores than workers for exclusive.
std::vector<NumaBinding> plan_numa_binding(const std::string& mode, int nproc,
                                           const NumaTopology& topology,
                                           const std::vector<int>& visible_gpus);

// The plan for `config` on this machine: sysfs under $DDPRUN_SYSFS_ROOT (tests) else /sys, the
// CPUs this process may use, CUDA_VISIBLE_DEVICES from `env`. Empty without --numa_binding.
std::vector<NumaBinding> numa_bindings_for(const LaunchConfig& config,
                                           const std::map<std::string, std::string>& env);

// The CPUs this process may run on (sched_getaffinity).
std::set<int> allowed_cpus_of_this_process();

// sysfs/cpuset list syntax: "0-3,8" <-> {0,1,2,3,8}. Parsing skips malformed items.
std::set<int> parse_cpu_list(std::string_view text);
std::string to_cpu_list(const std::set<int>& cpus);

}  // namespace ddp::agent
