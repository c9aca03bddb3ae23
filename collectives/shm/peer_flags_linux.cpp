// The futex barrier of PeerFlags. Spinning first keeps a barrier between two busy ranks in the
// microseconds; the futex keeps a waiting rank off the CPU when the ranks outnumber the cores (a
// spin there would steal the time slice the awaited rank needs). Futexes on a MAP_SHARED page
// work across processes (no FUTEX_PRIVATE_FLAG).
#include <fmt/format.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <stdexcept>
#include <string>

#include "collectives/shm/peer_flags.hpp"
#include "ddp/error.hpp"

namespace ddp::coll::shm {
namespace {

constexpr int kSpins = 256;
// How long one futex sleep lasts before the deadline and the peer's liveness are checked again.
constexpr std::chrono::milliseconds kNap{20};

std::uint32_t* word(std::atomic<std::uint32_t>& a) { return reinterpret_cast<std::uint32_t*>(&a); }

bool reached(const PeerFlags& peer, std::uint32_t generation) {
  // Wrap-safe: generations only grow, by one per barrier.
  return static_cast<std::int32_t>(peer.generation.load(std::memory_order_acquire) - generation) >=
         0;
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A process that exited is gone even before its parent reaps it: a zombie still takes kill(pid,
// 0), and a rank whose agent was SIGKILLed waits to be reaped by whoever adopts it (PID 1 of a
// container may take its time).
bool is_zombie(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(stat, text);
  const auto name_end = text.rfind(')');
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return false;
  const char state = text[name_end + 2];
  return state == 'Z' || state == 'X';
}

bool is_gone(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  return is_zombie(pid);
}

}  // namespace

void announce(PeerFlags& mine, std::uint32_t generation) {
  mine.generation.store(generation, std::memory_order_seq_cst);
  if (mine.sleepers.load(std::memory_order_seq_cst) > 0) {
    ::syscall(SYS_futex, word(mine.generation), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

void await(PeerFlags& peer, std::uint32_t generation,
           std::chrono::steady_clock::time_point deadline, int rank,
           const std::atomic<bool>& aborted) {
  for (int i = 0; i < kSpins; ++i) {
    if (reached(peer, generation)) return;
    cpu_relax();
  }
  for (;;) {
    const std::uint32_t seen = peer.generation.load(std::memory_order_seq_cst);
    peer.sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Announce stores the generation before it reads `sleepers`, and we register before this
    // second look, so either we see the new value here or announce sees us and wakes us.
    if (!reached(peer, generation) && peer.generation.load(std::memory_order_seq_cst) == seen) {
      const timespec nap{0, std::chrono::nanoseconds(kNap).count()};
      ::syscall(SYS_futex, word(peer.generation), FUTEX_WAIT, seen, &nap, nullptr, 0);
    }
    peer.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(peer, generation)) return;
    if (aborted.load()) {
      throw std::runtime_error(fmt::format("aborted while waiting for rank {}", rank));
    }
    if (is_gone(peer.pid)) {
      throw std::runtime_error(fmt::format("rank {} (pid {}) exited", rank, peer.pid));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw ddp::TimeoutError(fmt::format("timed out waiting for rank {}", rank));
    }
  }
}

}  // namespace ddp::coll::shm
