// NUMA placement, after torch.numa.binding (torchrun 2.8): the same four modes, read from the same
// sysfs files. Where torch asks CUDA for a GPU's PCI address, ddprun (which links no CUDA) lists
// NVIDIA PCI functions in bus order, the order CUDA_DEVICE_ORDER=PCI_BUS_ID gives; on the usual
// servers it is also CUDA's default order.

#include "agent/cli/numa_binding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kNvidiaVendor = "0x10de";

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(detail::strip(text.str()));
}

std::optional<int> read_int(const fs::path& path) {
  return parse_number<int>(read_text(path));
}

// The number after `prefix` in a directory name ("node12" -> 12), if that is all there is.
std::optional<int> suffix_number(const std::string& name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  return parse_number<int>(std::string_view(name).substr(prefix.size()));
}

// The lowest CPU sharing the highest-level data or unified cache with `cpu_dir`'s CPU.
std::optional<int> last_level_cache(const fs::path& cpu_dir) {
  std::error_code ec;
  int best_level = -1;
  std::optional<int> first;
  for (const auto& entry : fs::directory_iterator(cpu_dir / "cache", ec)) {
    if (!suffix_number(entry.path().filename().string(), "index")) continue;
    const std::string type = read_text(entry.path() / "type");
    if (type != "Unified" && type != "Data") continue;
    const std::optional<int> level = read_int(entry.path() / "level");
    if (!level || *level <= best_level) continue;
    const std::set<int> shared = parse_cpu_list(read_text(entry.path() / "shared_cpu_list"));
    if (shared.empty()) continue;
    best_level = *level;
    first = *shared.begin();
  }
  return first;
}

// Groups `cpus` by `key_of` (CPUs without a key form a group of their own), keyed by group id.
std::map<int, std::set<int>> group_by(const std::set<int>& cpus, const std::map<int, int>& key_of) {
  std::map<int, std::set<int>> groups;
  for (int cpu : cpus) {
    const auto it = key_of.find(cpu);
    groups[it == key_of.end() ? cpu : it->second].insert(cpu);
  }
  return groups;
}

[[noreturn]] void fail(const std::string& mode, const std::string& why) {
  throw ConfigError(fmt::format("--numa_binding={}: {}", mode, why));
}

}  // namespace

std::set<int> parse_cpu_list(std::string_view text) {
  std::set<int> cpus;
  for (std::string_view item : detail::split_commas(text)) {
    item = detail::strip(item);
    const std::size_t dash = item.find('-');
    const auto first = parse_number<int>(item.substr(0, dash));
    const auto last =
        dash == std::string_view::npos ? first : parse_number<int>(item.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first) continue;
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::string to_cpu_list(const std::set<int>& cpus) {
  std::string text;
  for (auto it = cpus.begin(); it != cpus.end();) {
    const int first = *it;
    int last = first;
    while (++it != cpus.end() && *it == last + 1) ++last;
    text += fmt::format("{}{}", text.empty() ? "" : ",", first);
    if (last != first) text += fmt::format("-{}", last);
  }
  return text;
}

NumaTopology read_numa_topology(const std::string& sysfs_root, const std::set<int>& allowed_cpus) {
  const fs::path root(sysfs_root);
  NumaTopology topology;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / "devices/system/node", ec)) {
    const auto node = suffix_number(entry.path().filename().string(), "node");
    if (!node) continue;
    std::set<int> cpus;
    for (int cpu : parse_cpu_list(read_text(entry.path() / "cpulist"))) {
      if (allowed_cpus.count(cpu) != 0) cpus.insert(cpu);
    }
    if (!cpus.empty()) topology.node_cpus[*node] = std::move(cpus);
  }
  for (const auto& [node, cpus] : topology.node_cpus) {
    for (int cpu : cpus) {
      const fs::path dir = root / fmt::format("devices/system/cpu/cpu{}", cpu);
      if (const auto package = read_int(dir / "topology/physical_package_id")) {
        topology.cpu_package[cpu] = *package;
      }
      const std::set<int> siblings =
          parse_cpu_list(read_text(dir / "topology/thread_siblings_list"));
      if (!siblings.empty()) topology.cpu_core[cpu] = *siblings.begin();
      if (const auto cache = last_level_cache(dir)) topology.cpu_cache[cpu] = *cache;
    }
  }
  std::vector<std::pair<std::string, int>> gpus;  // PCI address, NUMA node
  for (const auto& entry : fs::directory_iterator(root / "bus/pci/devices", ec)) {
    if (read_text(entry.path() / "vendor") != kNvidiaVendor) continue;
    const std::string pci_class = read_text(entry.path() / "class");
    if (!pci_class.starts_with("0x0300") && !pci_class.starts_with("0x0302")) continue;
    gpus.emplace_back(entry.path().filename().string(),
                      std::max(read_int(entry.path() / "numa_node").value_or(0), 0));
  }
  std::sort(gpus.begin(), gpus.end());
  for (const auto& gpu : gpus) topology.gpu_nodes.push_back(gpu.second);
  return topology;
}

std::vector<NumaBinding> plan_numa_binding(const std::string& mode, int nproc,
                                           const NumaTopology& topology,
                                           const std::vector<int>& visible_gpus) {
  if (topology.node_cpus.empty()) fail(mode, "no NUMA node with CPUs this process may use");
  std::vector<int> gpu_nodes;  // by CUDA index as the workers see it
  if (visible_gpus.empty()) {
    gpu_nodes = topology.gpu_nodes;
  } else {
    for (int index : visible_gpus) {
      if (index >= 0 && static_cast<std::size_t>(index) < topology.gpu_nodes.size()) {
        gpu_nodes.push_back(topology.gpu_nodes[static_cast<std::size_t>(index)]);
      }
    }
  }
  // Each worker's node and the units (GPUs or workers) that share it, in order.
  std::vector<int> node_of(static_cast<std::size_t>(nproc));
  std::vector<int> units;  // unit -> node: GPUs when every worker has one, else the workers
  if (gpu_nodes.size() >= static_cast<std::size_t>(nproc)) {
    for (int node : gpu_nodes) {
      units.push_back(topology.node_cpus.count(node) != 0 ? node
                                                          : topology.node_cpus.begin()->first);
    }
  } else {
    std::vector<int> nodes;
    for (const auto& entry : topology.node_cpus) nodes.push_back(entry.first);
    for (int rank = 0; rank < nproc; ++rank) {
      units.push_back(
          nodes[static_cast<std::size_t>(rank) * nodes.size() / static_cast<std::size_t>(nproc)]);
    }
  }
  std::vector<NumaBinding> plan;
  for (int rank = 0; rank < nproc; ++rank) {
    const int node = units[static_cast<std::size_t>(rank)];
    const std::set<int>& node_cpus = topology.node_cpus.at(node);
    int peers = 0;  // units on this node, and this rank's place among them
    int place = 0;
    for (std::size_t unit = 0; unit < units.size(); ++unit) {
      if (units[unit] != node) continue;
      if (unit < static_cast<std::size_t>(rank)) ++place;
      ++peers;
    }
    NumaBinding binding;
    binding.memory_node = node;
    if (mode == "node") {
      binding.cpus = node_cpus;
    } else if (mode == "socket") {
      const auto package = topology.cpu_package.find(*node_cpus.begin());
      for (const auto& [other, cpus] : topology.node_cpus) {
        const auto other_package = topology.cpu_package.find(*cpus.begin());
        const bool same = package != topology.cpu_package.end() &&
                          other_package != topology.cpu_package.end() &&
                          package->second == other_package->second;
        if (same || other == node) binding.cpus.insert(cpus.begin(), cpus.end());
      }
    } else if (mode == "exclusive") {
      const auto cores = group_by(node_cpus, topology.cpu_core);
      const int per_unit = static_cast<int>(cores.size()) / peers;
      const int extra = static_cast<int>(cores.size()) % peers;  // the lowest places get one more
      if (per_unit < 1) {
        fail(mode, fmt::format("NUMA node {} has {} physical core(s) for {} worker(s)", node,
                               cores.size(), peers));
      }
      const int start = place * per_unit + std::min(place, extra);
      const int end = start + per_unit + (place < extra ? 1 : 0);
      int index = 0;
      for (const auto& [core, cpus] : cores) {
        if (index >= start && index < end) binding.cpus.insert(cpus.begin(), cpus.end());
        ++index;
      }
    } else if (mode == "core-complex") {
      const auto caches = group_by(node_cpus, topology.cpu_cache);
      std::vector<const std::set<int>*> ordered;  // larger complexes first, then lower CPUs
      for (const auto& entry : caches) ordered.push_back(&entry.second);
      std::stable_sort(ordered.begin(), ordered.end(),
                       [](const auto* a, const auto* b) { return a->size() > b->size(); });
      binding.cpus = *ordered[static_cast<std::size_t>(place) % ordered.size()];
    } else {
      fail(mode, "unknown mode (choose from node, socket, exclusive, core-complex)");
    }
    plan.push_back(std::move(binding));
  }
  return plan;
}

std::vector<NumaBinding> numa_bindings_for(const LaunchConfig& config,
                                           const std::map<std::string, std::string>& env) {
  if (!config.numa_binding) return {};
  const auto root = env.find("DDPRUN_SYSFS_ROOT");
  const NumaTopology topology =
      read_numa_topology(root != env.end() && !root->second.empty() ? root->second : "/sys",
                         allowed_cpus_of_this_process());
  std::vector<int> visible;
  if (const auto it = env.find("CUDA_VISIBLE_DEVICES"); it != env.end()) {
    if (detail::strip(it->second).empty()) visible.push_back(-1);  // no GPU visible at all
    for (std::string_view item : detail::split_commas(it->second)) {
      // UUIDs or MIG names cannot be matched to a PCI address here: then every GPU counts.
      const auto index = parse_number<int>(detail::strip(item));
      if (!index && !visible.empty() && visible.front() == -1) break;
      if (!index) {
        visible.clear();
        break;
      }
      visible.push_back(*index);
    }
  }
  return plan_numa_binding(*config.numa_binding, config.nproc_per_node, topology, visible);
}

}  // namespace ddp::agent
