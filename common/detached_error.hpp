#pragma once
// What a detached coroutine (asio::co_spawn) that nothing waits for does with its error: its
// completion logs it, once, and nothing else fails (a link's end, a roll call's answer, a lease's
// revoke: each has another way to be found out).

#include <spdlog/spdlog.h>

#include <exception>
#include <string>
#include <utility>

#include "common/log.hpp"

namespace ddp {

// The message of the exception in `error` ("unknown error" for one that is no std::exception).
inline std::string error_text(std::exception_ptr error) {
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// A co_spawn completion that, when the coroutine threw, logs "<what>: <error>" at `level` on the
// logger `logger` (log::get); a coroutine's result, if it has one, is dropped.
inline auto log_if_thrown(std::string logger, spdlog::level::level_enum level, std::string what) {
  return [logger = std::move(logger), level, what = std::move(what)](std::exception_ptr error,
                                                                     auto&&...) {
    if (error) log::get(logger)->log(level, "{}: {}", what, error_text(error));
  };
}

}  // namespace ddp
