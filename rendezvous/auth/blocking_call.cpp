// The pool is made once and never destroyed: its threads end with the process, so a munged that
// hangs cannot hold the exit (a thread_pool's destructor joins its threads). The mutex orders
// cancel() against the post, so nothing is posted to a loop after its owner cancelled.

#include "rendezvous/auth/blocking_call.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace ddp::rdzv::auth {
namespace {

boost::asio::thread_pool& pool() {
  static auto* threads = new boost::asio::thread_pool(BlockingCall::kThreads);
  return *threads;
}

}  // namespace

std::shared_ptr<BlockingCall> BlockingCall::start(boost::asio::any_io_executor executor,
                                                  std::function<void()> work,
                                                  std::function<void()> done) {
  auto call = std::make_shared<BlockingCall>(std::move(executor), std::move(done));
  boost::asio::post(pool(), [call, work = std::move(work)] {
    work();
    call->deliver();
  });
  return call;
}

void BlockingCall::deliver() {
  const std::lock_guard lock(mutex_);
  if (!executor_) return;
  boost::asio::post(*executor_, [done = std::move(done_)] { done(); });
  executor_.reset();
}

void BlockingCall::cancel() {
  const std::lock_guard lock(mutex_);
  executor_.reset();
  done_ = nullptr;
}

}  // namespace ddp::rdzv::auth
