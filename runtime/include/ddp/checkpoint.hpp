#pragma once
// Checkpoint files in the safetensors format (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the raw little-endian data. PyTorch users load the weights with
// safetensors.torch.load_file; string metadata (epoch, step, ...) rides in "__metadata__".

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddp {

// One float32 tensor, owned.
struct CheckpointTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

struct Checkpoint {
  std::map<std::string, CheckpointTensor> tensors;
  std::map<std::string, std::string> metadata;

  // The metadata value `key`; ConfigError naming the file's key when it is absent.
  const std::string& meta(const std::string& key) const;
  std::int64_t meta_int(const std::string& key) const;

  // Copies tensor `name` into `dst`. Throws ConfigError naming the tensor when it is missing or
  // when its shape differs from `shape` ("tensor 0.weight has shape [1024, 784], the model
  // expects [512, 784]").
  void copy_to(const std::string& name, const std::vector<std::int64_t>& shape, float* dst) const;
};

// Writes `ckpt` to `path` atomically: a temporary file beside it, fsync, rename over `path`, fsync
// of the directory. A reader sees the old file or the new one, never a mix. Throws IoError.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Removes the temporary files "<path>.tmp.<pid>" that a save_checkpoint killed mid-write left
// beside `path`, unless process <pid> still lives on this host (it may be writing now). Returns
// how many were removed; files it cannot remove are left alone.
int remove_stale_checkpoint_temporaries(const std::string& path);

// Reads a checkpoint written by save_checkpoint (or any safetensors file of F32 tensors). Throws
// ConfigError naming the file and what is wrong (missing, truncated, bad header, unsupported
// dtype, offsets out of range).
Checkpoint load_checkpoint(const std::string& path);

// "[1024, 784]", for messages.
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace ddp
