// Device and CPU counting for --nproc_per_node. Why no CUDA: ddprun must resolve "gpu" on
// machines and builds without the toolkit; the device nodes the driver creates are enough, and
// CUDA_VISIBLE_DEVICES only ever narrows what the runtime would report.

#include "agent/cli/nproc.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "agent/core/text.hpp"
#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

bool is_all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Number of entries the CUDA runtime accepts: it stops at the first entry that is empty,
// negative or malformed ("0,1,-1,2" exposes two devices). UUID entries ("GPU-...") count.
int count_visible_entries(std::string_view list) {
  int count = 0;
  for (std::string_view item : detail::split_commas(list)) {
    if (!is_all_digits(item) && !item.starts_with("GPU-") && !item.starts_with("MIG-")) break;
    ++count;
  }
  return count;
}

}  // namespace

int count_cuda_devices(const std::map<std::string, std::string>& env, const std::string& dev_dir) {
  int physical = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("nvidia") && is_all_digits(std::string_view(name).substr(6))) ++physical;
  }
  const auto visible = env.find("CUDA_VISIBLE_DEVICES");
  if (visible == env.end()) return physical;
  return std::min(physical, count_visible_entries(visible->second));
}

int count_usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int resolve_nproc_per_node(std::string_view value, std::string_view origin,
                           const std::map<std::string, std::string>& env,
                           const std::string& dev_dir) {
  if (value == "cpu") return count_usable_cpus();
  if (value == "gpu") {
    const int gpus = count_cuda_devices(env, dev_dir);
    if (gpus == 0) {
      throw ConfigError(fmt::format(
          "{}: gpu: Cuda is not available (no /dev/nvidia* device{})", origin,
          env.count("CUDA_VISIBLE_DEVICES") != 0 ? " left by CUDA_VISIBLE_DEVICES" : ""));
    }
    return gpus;
  }
  if (value == "auto") {
    const int gpus = count_cuda_devices(env, dev_dir);
    return gpus > 0 ? gpus : count_usable_cpus();
  }
  const std::optional<int> number = parse_number<int>(value);
  if (!number) {
    throw ConfigError(
        fmt::format("{}: unsupported value '{}' (expected a positive integer, gpu, cpu or auto)",
                    origin, value));
  }
  if (*number <= 0) {
    throw ConfigError(fmt::format("{}: must be a positive integer, got '{}'", origin, value));
  }
  return *number;
}

}  // namespace ddp::agent
