// run_id_hash: FNV-1a 64 over each field, with a 0xff byte after each one (no argument contains
// it) so that ("ab", "c") and ("a", "bc") hash apart.

#include "agent/cli/run_id_hash.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

namespace ddp::agent {

std::string run_id_hash(const LaunchConfig& config) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto mix = [&hash](std::string_view text) {
    for (const char c : text) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ULL;
    }
    hash ^= 0xff;  // a separator that no argument contains
    hash *= 0x100000001b3ULL;
  };
  mix(config.rdzv_endpoint_raw);
  mix(config.nnodes_raw);
  mix(config.role);
  mix(config.module ? "-m" : config.no_python ? "--no_python" : "");
  mix(config.training_script);
  for (const std::string& arg : config.training_script_args) mix(arg);
  return fmt::format("job-{:012x}", hash >> 16);
}

}  // namespace ddp::agent
