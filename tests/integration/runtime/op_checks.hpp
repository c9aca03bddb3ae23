#pragma once
// Checks for the runtime test worker: runs every collective on every dtype at a given element
// count through a ddp::ProcessGroup and compares each result with the exact expected value.
// Inputs are small integers (1..3), so sums, products and averages over 2 or 4 ranks are exact in
// every dtype, float16 and bfloat16 included.

#include <cstddef>
#include <string>
#include <vector>

#include "ddp/process_group.hpp"

namespace ddp::test {

// Runs all_reduce (every op), broadcast, all_gather, reduce_scatter and barrier on `dtype` with
// main tensors of `count` elements. Returns the failures ("all_reduce sum float16 n=1: element 0
// is 3, expected 4"), empty when everything matched.
std::vector<std::string> check_collectives(ProcessGroup& group, DType dtype, std::size_t count);

// all_reduce with each of `ops`.
std::vector<std::string> check_all_reduce(ProcessGroup& group, DType dtype, std::size_t count,
                                          const std::vector<ReduceOp>& ops);

// broadcast, all_gather, reduce_scatter (sum) and barrier.
std::vector<std::string> check_data_movement(ProcessGroup& group, DType dtype, std::size_t count);

// Ring send/recv of `count` elements: each rank sends to rank+1 and receives from rank-1.
std::vector<std::string> check_send_recv(ProcessGroup& group, std::size_t count);

std::string dtype_name(DType dtype);

// Where the checks put their tensors: host memory (the default) or CUDA device `device` (inputs
// are copied there before each operation and results copied back before comparing).
void use_device_buffers(int device);

}  // namespace ddp::test
