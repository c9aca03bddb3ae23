#pragma once
// Runs an operation of an in-memory service (MemoryEtcd, MemoryStore, an adapter over them) to
// its end on the test's io_context and returns its value, rethrowing its exception. For calls
// that complete without other work on the loop (a bounded wait completes at its timeout).

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <exception>
#include <optional>
#include <utility>

namespace ddp::rdzv::test {

template <class T>
T finish_now(boost::asio::io_context& io, boost::asio::awaitable<T> op) {
  std::optional<T> value;
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(op), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) value = std::move(v);
  });
  io.restart();
  io.run();
  if (error) std::rethrow_exception(error);
  return std::move(*value);
}

inline void finish_now(boost::asio::io_context& io, boost::asio::awaitable<void> op) {
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(op), [&](std::exception_ptr e) { error = e; });
  io.restart();
  io.run();
  if (error) std::rethrow_exception(error);
}

}  // namespace ddp::rdzv::test
