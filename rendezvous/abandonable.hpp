#pragma once
// abandonable(): awaits an operation that runs detached, so that cancelling the awaiter (a
// signal, a race lost under `||`) returns at once even when the operation itself cannot be
// cancelled (a store wait on a TCP connection). The abandoned operation runs on to its own end
// and its result is dropped; it must own (or share) everything it touches.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <memory>
#include <variant>

namespace ddp::rdzv {

// Returns op's value or rethrows its exception; throws system_error(operation_aborted) when the
// awaiter is cancelled first. T must not be void (wrap such an op to return a bool).
template <typename T>
boost::asio::awaitable<T> abandonable(boost::asio::awaitable<T> op) {
  namespace asio = boost::asio;
  struct Pending {
    std::variant<std::monostate, T, std::exception_ptr> result;  // none yet, value, or error
    asio::steady_timer done;  // cancelled when the operation ends
  };
  const auto executor = co_await asio::this_coro::executor;
  auto pending = std::make_shared<Pending>(
      Pending{{}, asio::steady_timer(executor, asio::steady_timer::time_point::max())});
  asio::co_spawn(
      executor,
      [pending, op = std::move(op)]() mutable -> asio::awaitable<void> {
        try {
          pending->result.template emplace<1>(co_await std::move(op));
        } catch (...) {
          pending->result.template emplace<2>(std::current_exception());
        }
        pending->done.cancel();
      },
      asio::detached);
  if (pending->result.index() == 0) {
    co_await pending->done.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  if (pending->result.index() == 0) {
    throw boost::system::system_error(asio::error::operation_aborted);
  }
  if (pending->result.index() == 2) std::rethrow_exception(std::get<2>(pending->result));
  co_return std::move(std::get<1>(pending->result));
}

}  // namespace ddp::rdzv
