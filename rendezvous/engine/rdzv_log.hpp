#pragma once
// The round protocols' logger ("rdzv") and the seconds their messages show, one definition for
// the files of c10d/ and etcd/ (a unity build puts a target's files in one translation unit,
// where file-local copies would collide).

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "common/log.hpp"

namespace ddp::rdzv {

inline std::shared_ptr<spdlog::logger> logger() { return log::get("rdzv"); }

// A duration as fractional seconds, for a message ("waiting up to {:.1f} s").
inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace ddp::rdzv
