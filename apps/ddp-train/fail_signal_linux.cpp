// The SIGUSR1 handler only sets a flag; the training thread reads it between steps.

#include <signal.h>

#include <atomic>

#include "apps/ddp-train/fail_signal.hpp"

namespace ddp::train {
namespace {

std::atomic<bool> fail_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_sigusr1(int) { fail_requested.store(true, std::memory_order_relaxed); }

}  // namespace

void arm_fail_on_sigusr1() {
  struct sigaction action {};
  action.sa_handler = on_sigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
}

bool is_fail_requested() { return fail_requested.load(std::memory_order_relaxed); }

}  // namespace ddp::train
