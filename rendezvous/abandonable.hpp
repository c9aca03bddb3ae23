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
#include <optional>

namespace ddp::rdzv {

namespace detail {

template <typename T>
struct Abandonable {
  explicit Abandonable(const boost::asio::any_io_executor& executor) : done_timer(executor) {
    done_timer.expires_at(boost::asio::steady_timer::time_point::max());
  }
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
  boost::asio::steady_timer done_timer;  // cancelled when the operation ends
};

}  // namespace detail

// Returns op's value or rethrows its exception; throws system_error(operation_aborted) when the
// awaiter is cancelled first. T must not be void (wrap such an op to return a bool).
template <typename T>
boost::asio::awaitable<T> abandonable(boost::asio::awaitable<T> op) {
  namespace asio = boost::asio;
  const auto executor = co_await asio::this_coro::executor;
  auto pending = std::make_shared<detail::Abandonable<T>>(executor);
  asio::co_spawn(
      executor,
      [pending, op = std::move(op)]() mutable -> asio::awaitable<void> {
        try {
          pending->value.emplace(co_await std::move(op));
        } catch (...) {
          pending->error = std::current_exception();
        }
        pending->done = true;
        pending->done_timer.cancel();
      },
      asio::detached);
  while (!pending->done) {
    co_await pending->done_timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!pending->done) throw boost::system::system_error(asio::error::operation_aborted);
  }
  if (pending->error) std::rethrow_exception(pending->error);
  co_return std::move(*pending->value);
}

}  // namespace ddp::rdzv
