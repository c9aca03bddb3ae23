// IDX over gzip, decoded with zlib's gzFile API (which also reads a plain, uncompressed file; we
// insist on gzip so that a truncated download is reported rather than silently short).

#include "apps/ddp-train/fashion_mnist.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "ddp/error.hpp"

namespace ddp::train {
namespace {

std::uint32_t read_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace

std::vector<std::uint8_t> read_gzip_file(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    throw ConfigError(fmt::format("data file {}: cannot open: {}", path, std::strerror(errno)));
  }
  unsigned char magic[2] = {0, 0};
  probe.read(reinterpret_cast<char*>(magic), 2);
  if (probe.gcount() != 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
    throw ConfigError(fmt::format("data file {}: not a gzip file", path));
  }
  probe.close();
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw ConfigError(fmt::format("data file {}: cannot open", path));
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f, chunk, sizeof(chunk));
    if (n < 0) {
      int code = 0;
      const std::string what = gzerror(f, &code);
      gzclose(f);
      throw ConfigError(fmt::format("data file {}: corrupt gzip data: {}", path, what));
    }
    if (n == 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  // gzread returns 0 both at a clean end and on a stream cut short; gzclose_r reports the latter.
  int code = 0;
  const std::string what = gzerror(f, &code);
  if (gzclose(f) != Z_OK || code != Z_OK) {
    throw ConfigError(fmt::format("data file {}: corrupt gzip data: {}", path,
                                  code != Z_OK ? what : "truncated stream"));
  }
  return out;
}

std::vector<std::uint32_t> parse_idx(const std::string& path, std::vector<std::uint8_t> bytes,
                                     std::vector<std::uint8_t>& data) {
  if (bytes.size() < 4) throw ConfigError(fmt::format("data file {}: too short for IDX", path));
  const std::uint32_t magic = read_be32(bytes.data());
  const std::uint32_t dims = magic & 0xff;
  if ((magic & 0xffffff00u) != 0x00000800u || dims < 1 || dims > 4) {
    throw ConfigError(
        fmt::format("data file {}: bad IDX magic {:#010x} (expected unsigned bytes)", path, magic));
  }
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(dims);
  if (bytes.size() < header) {
    throw ConfigError(fmt::format("data file {}: IDX header cut short", path));
  }
  std::vector<std::uint32_t> shape;
  std::size_t expected = 1;
  for (std::uint32_t d = 0; d < dims; ++d) {
    shape.push_back(read_be32(bytes.data() + 4 + 4 * d));
    expected *= shape.back();
  }
  if (bytes.size() - header != expected) {
    throw ConfigError(fmt::format("data file {}: IDX payload has {} bytes, its dimensions need {}",
                                  path, bytes.size() - header, expected));
  }
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  data = std::move(bytes);
  return shape;
}

Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string stem = train ? "train" : "t10k";
  const std::string images_path = join_path(dir, stem + "-images-idx3-ubyte.gz");
  const std::string labels_path = join_path(dir, stem + "-labels-idx1-ubyte.gz");
  std::vector<std::uint8_t> pixels;
  std::vector<std::uint8_t> label_bytes;
  const auto image_shape = parse_idx(images_path, read_gzip_file(images_path), pixels);
  const auto label_shape = parse_idx(labels_path, read_gzip_file(labels_path), label_bytes);
  if (image_shape.size() != 3) {
    throw ConfigError(fmt::format("data file {}: expected 3 dimensions, found {}", images_path,
                                  image_shape.size()));
  }
  if (label_shape.size() != 1 || label_shape[0] != image_shape[0]) {
    throw ConfigError(fmt::format("data file {}: {} labels for {} images in {}", labels_path,
                                  label_shape.empty() ? 0 : label_shape[0], image_shape[0],
                                  images_path));
  }
  Dataset ds;
  ds.size = image_shape[0];
  ds.features = static_cast<int>(image_shape[1] * image_shape[2]);
  ds.images.resize(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    ds.images[i] = (static_cast<float>(pixels[i]) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  }
  ds.labels.resize(label_bytes.size());
  for (std::size_t i = 0; i < label_bytes.size(); ++i) {
    if (label_bytes[i] > 9) {
      throw ConfigError(fmt::format("data file {}: label {} at index {} is outside [0, 10)",
                                    labels_path, label_bytes[i], i));
    }
    ds.labels[i] = label_bytes[i];
  }
  return ds;
}

}  // namespace ddp::train
