// --numa_binding plans against a fake sysfs tree: three NUMA nodes (two on socket 0, one on
// socket 1), two hyperthreads per core, an L3 cache per two cores, three NVIDIA GPUs.

#include "agent/cli/numa_binding.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// node0: CPUs 0-3, node1: 4-7 (socket 0), node2: 8-11 (socket 1). A core is a CPU pair
// (2k, 2k+1) with its own L3 (a core complex of one core); GPUs 0 and 1 on node 0, GPU 2 on node 1.
struct FakeSysfs {
  fs::path root = fs::temp_directory_path() / ("ddprun_numa_" + std::to_string(::getpid()));
  FakeSysfs() {
    fs::remove_all(root);
    write(root / "devices/system/node/node0/cpulist", "0-3");
    write(root / "devices/system/node/node1/cpulist", "4-7");
    write(root / "devices/system/node/node2/cpulist", "8-11");
    write(root / "devices/system/node/possible", "0-2");  // not a node directory: ignored
    for (int cpu = 0; cpu < 12; ++cpu) {
      const fs::path dir = root / ("devices/system/cpu/cpu" + std::to_string(cpu));
      const int core = cpu - cpu % 2;
      write(dir / "topology/physical_package_id", cpu < 8 ? "0" : "1");
      write(dir / "topology/thread_siblings_list", fmt_pair(core, core + 1));
      write(dir / "cache/index0/type", "Instruction");  // never the last level
      write(dir / "cache/index0/level", "4");
      write(dir / "cache/index0/shared_cpu_list", "0-11");
      write(dir / "cache/index2/type", "Unified");
      write(dir / "cache/index2/level", "2");
      write(dir / "cache/index2/shared_cpu_list", fmt_pair(core, core + 1));
      write(dir / "cache/index3/type", "Unified");
      write(dir / "cache/index3/level", "3");
      write(dir / "cache/index3/shared_cpu_list", fmt_pair(core, core + 1));
    }
    gpu("0000:81:00.0", "1");  // listed first on disk, second in bus order
    gpu("0000:01:00.0", "0");
    gpu("0000:02:00.0", "0");
    write(root / "bus/pci/devices/0000:00:1f.0/vendor", "0x8086");  // not NVIDIA
    write(root / "bus/pci/devices/0000:00:1f.0/class", "0x030000");
  }
  ~FakeSysfs() { fs::remove_all(root); }
  static std::string fmt_pair(int a, int b) { return std::to_string(a) + "-" + std::to_string(b); }
  void gpu(const std::string& address, const std::string& node) {
    const fs::path dir = root / "bus/pci/devices" / address;
    write(dir / "vendor", "0x10de");
    write(dir / "class", "0x030200");
    write(dir / "numa_node", node);
  }
  NumaTopology read(std::set<int> allowed = parse_cpu_list("0-11")) const {
    return read_numa_topology(root.string(), allowed);
  }
};

std::vector<std::string> cpus_of(const std::vector<NumaBinding>& plan) {
  std::vector<std::string> lists;
  for (const auto& binding : plan) lists.push_back(to_cpu_list(binding.cpus));
  return lists;
}

using Lists = std::vector<std::string>;

TEST_CASE("cpu lists parse and print in sysfs syntax", "[numa]") {
  CHECK(parse_cpu_list("0-2,4,6-7\n") == std::set<int>{0, 1, 2, 4, 6, 7});
  CHECK(to_cpu_list({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7");
  CHECK(parse_cpu_list("x,3-1,5").size() == 1);
}

TEST_CASE("the topology: nodes, GPUs in PCI bus order, cores and last-level caches", "[numa]") {
  const FakeSysfs sysfs;
  const NumaTopology topology = sysfs.read();
  CHECK(topology.node_cpus.size() == 3);
  CHECK(topology.gpu_nodes == std::vector<int>{0, 0, 1});
  CHECK(topology.cpu_core.at(5) == 4);
  CHECK(topology.cpu_cache.at(3) == 2);
  CHECK(topology.cpu_package.at(9) == 1);
  SECTION("CPUs this process may not use are left out") {
    const NumaTopology limited = sysfs.read(parse_cpu_list("0-5"));
    CHECK(limited.node_cpus.size() == 2);
    CHECK(to_cpu_list(limited.node_cpus.at(1)) == "4-5");
  }
}

TEST_CASE("GPU workers bind near their GPU in torchrun 2.8's four modes", "[numa]") {
  const FakeSysfs sysfs;
  const NumaTopology topology = sysfs.read();
  CHECK(cpus_of(plan_numa_binding("node", 3, topology, {})) == Lists{"0-3", "0-3", "4-7"});
  CHECK(cpus_of(plan_numa_binding("socket", 3, topology, {})) == Lists{"0-7", "0-7", "0-7"});
  // Node 0 holds GPUs 0 and 1: its two cores are split between them.
  CHECK(cpus_of(plan_numa_binding("exclusive", 3, topology, {})) == Lists{"0-1", "2-3", "4-7"});
  CHECK(cpus_of(plan_numa_binding("core-complex", 3, topology, {})) ==
        Lists{"0-1", "2-3", "4-5"});
  const auto plan = plan_numa_binding("node", 3, topology, {});
  CHECK(plan[2].memory_node == 1);
  SECTION("CUDA_VISIBLE_DEVICES picks the GPUs") {
    CHECK(cpus_of(plan_numa_binding("node", 1, topology, {2})) == Lists{"4-7"});
  }
}

TEST_CASE("CPU workers get an even split of the NUMA nodes", "[numa]") {
  const FakeSysfs sysfs;
  const NumaTopology topology = sysfs.read();
  CHECK(cpus_of(plan_numa_binding("node", 4, topology, {})) ==
        Lists{"0-3", "0-3", "4-7", "8-11"});
  CHECK(cpus_of(plan_numa_binding("exclusive", 4, topology, {})) ==
        Lists{"0-1", "2-3", "4-7", "8-11"});
  CHECK(cpus_of(plan_numa_binding("node", 3, topology, {-1})) == Lists{"0-3", "4-7", "8-11"});
  CHECK_THROWS_WITH(plan_numa_binding("exclusive", 12, topology, {}),
                    Catch::Contains("--numa_binding=exclusive: NUMA node 0 has 2 physical core(s) "
                                    "for 4 worker(s)"));
  CHECK_THROWS_WITH(plan_numa_binding("node", 2, NumaTopology{}, {}),
                    Catch::Contains("--numa_binding=node: no NUMA node"));
}

}  // namespace
}  // namespace ddp::agent
