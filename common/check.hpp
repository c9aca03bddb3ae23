#pragma once
// DDP_CHECK: an invariant checked at a module boundary; throws ddp::InternalError when it fails.

#include <fmt/format.h>

#include "ddp/error.hpp"

#define DDP_CHECK(cond, ...)                                                           \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      throw ::ddp::InternalError(fmt::format("check failed: {} ({}:{}): {}", #cond,    \
                                             __FILE__, __LINE__, fmt::format(__VA_ARGS__))); \
    }                                                                                  \
  } while (0)
