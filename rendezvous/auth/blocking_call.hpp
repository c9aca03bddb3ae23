#pragma once
// BlockingCall: a call that blocks (a round trip to munged) run on a few threads kept for such
// calls, its completion posted back to the caller's loop, so that one slow call does not stall
// every other connection of the loop (docs/security.md). off_loop() is its coroutine form.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>

namespace ddp::rdzv::auth {

class BlockingCall {
 public:
  // Runs `work` on a thread of the pool, then `done` on `executor`, unless cancel() ran first.
  // At most kThreads calls run at once; more wait for a thread (a flood of them delays only each
  // other). `work` must not throw.
  static std::shared_ptr<BlockingCall> start(boost::asio::any_io_executor executor,
                                             std::function<void()> work,
                                             std::function<void()> done);
  static constexpr int kThreads = 4;

  // `done` will not run (the connection that asked closed). A `work` already running finishes on
  // its thread. Call it on the executor's thread, before the executor's io_context goes.
  void cancel();

  BlockingCall(boost::asio::any_io_executor executor, std::function<void()> done)
      : executor_(std::move(executor)), done_(std::move(done)) {}

 private:
  void deliver();

  std::mutex mutex_;
  std::optional<boost::asio::any_io_executor> executor_;  // reset by cancel()
  std::function<void()> done_;
};

// Runs `work` off the loop and returns its result (or rethrows what it threw) on the calling
// coroutine's executor.
template <class T>
boost::asio::awaitable<T> off_loop(std::function<T()> work) {
  namespace asio = boost::asio;
  const auto executor = co_await asio::this_coro::executor;
  auto result = std::make_shared<std::variant<std::monostate, T, std::exception_ptr>>();
  auto finished = std::make_shared<asio::steady_timer>(executor,
                                                       asio::steady_timer::time_point::max());
  const auto call = BlockingCall::start(
      executor,
      [result, work = std::move(work)] {
        try {
          result->template emplace<1>(work());
        } catch (...) {
          result->template emplace<2>(std::current_exception());
        }
      },
      [finished] { finished->cancel(); });
  // Cancelled too when this coroutine is destroyed unfinished (its loop stopped).
  const std::shared_ptr<void> cancel_on_exit(nullptr, [call](void*) { call->cancel(); });
  co_await finished->async_wait(asio::as_tuple(asio::use_awaitable));
  if (result->index() == 2) std::rethrow_exception(std::get<2>(*result));
  co_return std::move(std::get<1>(*result));
}

}  // namespace ddp::rdzv::auth
