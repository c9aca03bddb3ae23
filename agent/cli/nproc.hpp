#pragma once
// --nproc_per_node resolution: an integer, or "gpu" / "cpu" / "auto" counted on this machine
// without linking CUDA (device nodes and CUDA_VISIBLE_DEVICES, as torch.cuda.device_count()).

#include <map>
#include <string>
#include <string_view>

namespace ddp::agent {

// CUDA devices visible to workers: the /dev/nvidia<N> nodes under `dev_dir`, narrowed by
// CUDA_VISIBLE_DEVICES in `env` (entries up to the first invalid one, as the CUDA runtime reads
// it). 0 when there is no driver.
int count_cuda_devices(const std::map<std::string, std::string>& env,
                       const std::string& dev_dir = "/dev");

// CPUs this process may run on (affinity-aware, as newest torchrun).
int count_usable_cpus();

// Resolves `value` (int > 0 | gpu | cpu | auto). `origin` names the flag or PET variable in
// errors. Throws ConfigError: "Cuda is not available" for gpu without devices, bad integers,
// unknown words.
int resolve_nproc_per_node(std::string_view value, std::string_view origin,
                           const std::map<std::string, std::string>& env,
                           const std::string& dev_dir = "/dev");

}  // namespace ddp::agent
