#pragma once
// Fashion-MNIST from its four gzipped IDX files (Debian's dataset-fashion-mnist layout), read with
// zlib. Errors name the file and what is wrong with it.

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::train {

inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

// One split: `size` images of `features` floats each (pixels scaled to [0,1] then normalized with
// Fashion-MNIST's mean and standard deviation) and their labels in [0, 10).
struct Dataset {
  std::int64_t size = 0;
  int features = 0;
  std::vector<float> images;  // size x features, row-major
  std::vector<std::int32_t> labels;

  const float* row(std::int64_t i) const {
    return images.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(features);
  }
};

inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// The decompressed bytes of a gzip file. Throws ConfigError "<path>: ..." when the file is missing,
// unreadable or not valid gzip.
std::vector<std::uint8_t> read_gzip_file(const std::string& path);

// Parses an IDX file (big-endian magic 0x0000080N, N dimensions, unsigned bytes). Returns the
// dimensions and leaves the payload in `data` (moved out of `bytes`). Throws ConfigError naming
// `path` on a bad magic number or a payload that does not match its dimensions.
std::vector<std::uint32_t> parse_idx(const std::string& path, std::vector<std::uint8_t> bytes,
                                     std::vector<std::uint8_t>& data);

// Loads `train` ("train-images-idx3-ubyte.gz" + "train-labels-idx1-ubyte.gz") or the test split
// ("t10k-...") from `dir`. Throws ConfigError naming the file at fault.
Dataset load_fashion_mnist(const std::string& dir, bool train);

}  // namespace ddp::train
