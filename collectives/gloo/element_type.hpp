#pragma once
// with_element_type: calls f.template operator()<T>() with a type T of the dtype's size. Gloo only
// needs the element size for moving data; the reductions are ours (reduce_functions.hpp).

#include <cstdint>

#include "ddp/process_group.hpp"

namespace ddp::coll {

template <class F>
void with_element_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kFloat16:
    case DType::kBFloat16:
      return f.template operator()<std::uint16_t>();
    case DType::kInt32:
      return f.template operator()<std::int32_t>();
    case DType::kInt64:
      return f.template operator()<std::int64_t>();
    case DType::kUInt8:
      return f.template operator()<std::uint8_t>();
  }
}

}  // namespace ddp::coll
