// safetensors reading and writing. Tensors are written in name order with the header padded with
// spaces to a multiple of 8 bytes (as the reference writer does), so equal checkpoints are equal
// files byte for byte.

#include "ddp/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"

namespace ddp {
namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

void write_all(int fd, const void* data, std::size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw IoError(fmt::format("checkpoint {}: write: {}", path, std::strerror(errno)));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void fsync_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; a directory we cannot open cannot be synced either
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

const std::string& Checkpoint::meta(const std::string& key) const {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw ConfigError(fmt::format("no metadata '{}'", key));
  return it->second;
}

std::int64_t Checkpoint::meta_int(const std::string& key) const {
  const std::string& v = meta(key);
  if (const auto n = parse_number<std::int64_t>(v)) return *n;
  throw ConfigError(fmt::format("metadata '{}' is '{}', not an integer", key, v));
}

void Checkpoint::copy_to(const std::string& name, const std::vector<std::int64_t>& shape,
                         float* dst) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw ConfigError(fmt::format("no tensor {}", name));
  if (it->second.shape != shape) {
    throw ConfigError(fmt::format("tensor {} has shape {}, the model expects {}", name,
                                  shape_string(it->second.shape), shape_string(shape)));
  }
  std::memcpy(dst, it->second.data.data(), it->second.data.size() * sizeof(float));
}

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : ckpt.tensors) {
    const std::uint64_t bytes = t.data.size() * sizeof(float);
    header[name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!ckpt.metadata.empty()) header["__metadata__"] = ckpt.metadata;
  std::string text = header.dump();
  text.append((8 - (text.size() % 8)) % 8, ' ');
  const std::uint64_t header_len = text.size();
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(header_len >> (8 * i));

  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("checkpoint {}: create: {}", tmp, std::strerror(errno)));
  try {
    write_all(fd, len_bytes, sizeof(len_bytes), tmp);
    write_all(fd, text.data(), text.size(), tmp);
    // The data is little-endian float32, which is this machine's layout (x86-64, aarch64).
    for (const auto& [name, t] : ckpt.tensors) {
      write_all(fd, t.data.data(), t.data.size() * sizeof(float), tmp);
    }
    if (::fsync(fd) != 0) {
      throw IoError(fmt::format("checkpoint {}: fsync: {}", tmp, std::strerror(errno)));
    }
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("checkpoint {}: rename from {}: {}", path, tmp, std::strerror(err)));
  }
  fsync_dir(path);
}

int remove_stale_checkpoint_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = target.filename().string() + ".tmp.";
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    // A live writer (this host's pid namespace) keeps its file: it renames or removes it itself.
    if (fs::exists(fs::path("/proc") / pid, ec)) continue;
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(fmt::format("checkpoint {}: cannot open: {}", path, std::strerror(errno)));
  }
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char len_bytes[8];
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) {
    throw ConfigError(fmt::format("checkpoint {}: too short for a safetensors file", path));
  }
  std::uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= std::uint64_t{len_bytes[i]} << (8 * i);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8) {
    throw ConfigError(
        fmt::format("checkpoint {}: header length {} does not fit the file ({} bytes)", path,
                    header_len, file_size));
  }
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  const json header = json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    throw ConfigError(fmt::format("checkpoint {}: header is not a JSON object", path));
  }
  const std::uint64_t data_start = 8 + header_len;
  const std::uint64_t data_size = file_size - data_start;
  std::vector<char> data(data_size);
  if (!in.read(data.data(), static_cast<std::streamsize>(data_size))) {
    throw ConfigError(fmt::format("checkpoint {}: cannot read its data", path));
  }
  Checkpoint ckpt;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw ConfigError(fmt::format("checkpoint {}: __metadata__ is not an object", path));
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw ConfigError(fmt::format("checkpoint {}: metadata '{}' is not a string", path, key));
        }
        ckpt.metadata.insert_or_assign(key, value.get<std::string>());
      }
      continue;
    }
    const bool well_formed = entry.is_object() && entry.contains("dtype") &&
                             entry["dtype"].is_string() && entry.contains("shape") &&
                             entry["shape"].is_array() && entry.contains("data_offsets") &&
                             entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2;
    if (!well_formed) {
      throw ConfigError(fmt::format("checkpoint {}: tensor {} has a malformed entry", path, name));
    }
    if (entry["dtype"] != "F32") {
      throw ConfigError(fmt::format("checkpoint {}: tensor {} has dtype {}, only F32 is supported",
                                    path, name, entry["dtype"].get<std::string>()));
    }
    CheckpointTensor t;
    std::uint64_t elements = 1;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) {
        throw ConfigError(fmt::format("checkpoint {}: tensor {} has a bad shape", path, name));
      }
      t.shape.push_back(d.get<std::int64_t>());
      elements *= d.get<std::uint64_t>();
    }
    const auto& offs = entry["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      throw ConfigError(fmt::format("checkpoint {}: tensor {} has bad data_offsets", path, name));
    }
    const auto begin = offs[0].get<std::uint64_t>();
    const auto end = offs[1].get<std::uint64_t>();
    if (begin > end || end > data_size || end - begin != elements * sizeof(float)) {
      throw ConfigError(fmt::format(
          "checkpoint {}: tensor {} data_offsets [{}, {}] do not match shape {} in {} data bytes "
          "(truncated file?)",
          path, name, begin, end, shape_string(t.shape), data_size));
    }
    t.data.resize(elements);
    std::memcpy(t.data.data(), data.data() + begin, end - begin);
    ckpt.tensors.insert_or_assign(name, std::move(t));
  }
  return ckpt;
}

}  // namespace ddp
