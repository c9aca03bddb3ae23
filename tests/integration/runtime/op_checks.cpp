// Expected values are computed in double and converted to the dtype's bits by the same
// conversions the library uses for storage only (no reduction logic is shared with the library).
#include "op_checks.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "device_memory.hpp"

namespace ddp::test {
namespace {

// IEEE half from a double that is exactly representable (small integers and quarters here).
std::uint16_t to_half_exact(double v) {
  if (v == 0) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  double a = std::fabs(v);
  int exponent = 0;
  const double mantissa = std::frexp(a, &exponent);  // a = mantissa * 2^exponent, [0.5, 1)
  const int biased = exponent - 1 + 15;
  const auto fraction = static_cast<std::uint16_t>(std::lround((mantissa * 2 - 1) * 1024));
  return static_cast<std::uint16_t>(sign | (biased << 10) | fraction);
}

std::uint16_t to_bfloat16_exact(double v) {
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
}

// Writes `v` at element i of a buffer of `dtype`.
void store_value(DType dtype, void* data, std::size_t i, double v) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(data)[i] = v; break;
    case DType::kFloat16: static_cast<std::uint16_t*>(data)[i] = to_half_exact(v); break;
    case DType::kBFloat16: static_cast<std::uint16_t*>(data)[i] = to_bfloat16_exact(v); break;
    case DType::kInt32: static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(v); break;
    case DType::kInt64: static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(v); break;
    case DType::kUInt8: static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(v); break;
  }
}

bool is_integer(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kInt64 || dtype == DType::kUInt8;
}

// Rank r's input element i: 1, 2 or 3.
double input_of(int rank, std::size_t i) { return static_cast<double>((i + rank) % 3 + 1); }

double expected_reduce(ReduceOp op, int size, std::size_t i, DType dtype) {
  double acc = input_of(0, i);
  double sum = acc;
  for (int r = 1; r < size; ++r) {
    const double v = input_of(r, i);
    sum += v;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
    }
  }
  if (op != ReduceOp::kAvg) return acc;
  return is_integer(dtype) ? std::trunc(sum / size) : sum / size;
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

int g_device = -1;  // use_device_buffers(): the CUDA device, or -1 for host memory

// A tensor's host bytes, mirrored on the device when use_device_buffers() was called: tensor()
// uploads the host bytes, download() brings the result back.
struct Buffer {
  Buffer(DType d, std::size_t n) : dtype(d), count(n), bytes(n * dtype_size(d)) {
    if (g_device >= 0) device_data = device_alloc(bytes.size(), g_device);
  }
  ~Buffer() {
    if (device_data != nullptr) device_free(device_data, g_device);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Tensor tensor() {
    if (device_data == nullptr) return Tensor{bytes.data(), count, dtype};
    copy_to_device(device_data, bytes.data(), bytes.size(), g_device);
    return Tensor{device_data, count, dtype, DeviceKind::kCuda, g_device};
  }
  void download() {
    if (device_data != nullptr) copy_to_host(bytes.data(), device_data, bytes.size(), g_device);
  }

  DType dtype;
  std::size_t count;
  std::vector<std::uint8_t> bytes;
  void* device_data = nullptr;
};

// Compares `actual` with the expected value of each element (fn(i)); records the first mismatch.
template <class Fn>
void compare(std::vector<std::string>& failures, const std::string& what, Buffer& actual, Fn fn) {
  actual.download();
  const std::size_t width = dtype_size(actual.dtype);
  std::uint8_t expected[8];
  for (std::size_t i = 0; i < actual.count; ++i) {
    store_value(actual.dtype, expected, 0, fn(i));
    if (std::memcmp(expected, actual.bytes.data() + i * width, width) != 0) {
      failures.push_back(fmt::format("{}: element {} differs from expected {}", what, i, fn(i)));
      return;
    }
  }
}

}  // namespace

void use_device_buffers(int device) { g_device = device; }

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
  }
  return "?";
}

std::vector<std::string> check_collectives(ProcessGroup& group, DType dtype, std::size_t count) {
  auto failures = check_all_reduce(group, dtype, count,
                                   {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct,
                                    ReduceOp::kMin, ReduceOp::kMax});
  auto more = check_data_movement(group, dtype, count);
  failures.insert(failures.end(), more.begin(), more.end());
  return failures;
}

std::vector<std::string> check_all_reduce(ProcessGroup& group, DType dtype, std::size_t count,
                                          const std::vector<ReduceOp>& ops) {
  std::vector<std::string> failures;
  const int rank = group.rank();
  const int size = group.size();
  const std::string suffix = fmt::format("{} n={}", dtype_name(dtype), count);
  for (ReduceOp op : ops) {
    Buffer b(dtype, count);
    for (std::size_t i = 0; i < count; ++i) {
      store_value(dtype, b.bytes.data(), i, input_of(rank, i));
    }
    group.all_reduce(b.tensor(), op)->wait();
    compare(failures, fmt::format("all_reduce {} {}", op_name(op), suffix), b,
            [&](std::size_t i) { return expected_reduce(op, size, i, dtype); });
  }
  return failures;
}

std::vector<std::string> check_data_movement(ProcessGroup& group, DType dtype, std::size_t count) {
  std::vector<std::string> failures;
  const int rank = group.rank();
  const int size = group.size();
  const std::string suffix = fmt::format("{} n={}", dtype_name(dtype), count);

  const int root = size - 1;
  Buffer bc(dtype, count);
  for (std::size_t i = 0; i < count; ++i) store_value(dtype, bc.bytes.data(), i, input_of(rank, i));
  group.broadcast(bc.tensor(), root)->wait();
  compare(failures, "broadcast " + suffix, bc, [&](std::size_t i) { return input_of(root, i); });

  // all_gather: the output has `count` elements (rounded down to a multiple of size, at
  // least size).
  const std::size_t per_rank = std::max<std::size_t>(1, count / size);
  Buffer in(dtype, per_rank), out(dtype, per_rank * size);
  for (std::size_t i = 0; i < per_rank; ++i) {
    store_value(dtype, in.bytes.data(), i, input_of(rank, i));
  }
  group.all_gather(in.tensor(), out.tensor())->wait();
  compare(failures, "all_gather " + suffix, out, [&](std::size_t i) {
    return input_of(static_cast<int>(i / per_rank), i % per_rank);
  });

  // reduce_scatter: the input has per_rank * size elements; rank r gets its slice of the sum.
  Buffer rs_in(dtype, per_rank * size), rs_out(dtype, per_rank);
  for (std::size_t i = 0; i < rs_in.count; ++i) {
    store_value(dtype, rs_in.bytes.data(), i, input_of(rank, i));
  }
  group.reduce_scatter(rs_in.tensor(), rs_out.tensor(), ReduceOp::kSum)->wait();
  compare(failures, "reduce_scatter sum " + suffix, rs_out, [&](std::size_t i) {
    return expected_reduce(ReduceOp::kSum, size, rank * per_rank + i, dtype);
  });

  group.barrier()->wait();
  return failures;
}

std::vector<std::string> check_send_recv(ProcessGroup& group, std::size_t count) {
  std::vector<std::string> failures;
  const int rank = group.rank();
  const int size = group.size();
  if (size < 2) return failures;
  Buffer out(DType::kInt32, count), in(DType::kInt32, count);
  for (std::size_t i = 0; i < count; ++i) {
    store_value(DType::kInt32, out.bytes.data(), i, rank * 10 + i % 7);
  }
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  auto recv = group.recv(in.tensor(), prev, 5);
  auto send = group.send(out.tensor(), next, 5);
  send->wait();
  recv->wait();
  compare(failures, fmt::format("recv from {} n={}", prev, count), in,
          [&](std::size_t i) { return static_cast<double>(prev * 10 + i % 7); });
  return failures;
}

}  // namespace ddp::test
