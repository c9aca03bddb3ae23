// Starting workers. The child is made with clone(CLONE_VM | CLONE_VFORK), as posix_spawn does:
// it runs on a stack of its own in the agent's memory, and the calling thread waits until it has
// exec'd. Nothing is copied, so starting a worker costs no page-table copy and no copy-on-write
// faults afterwards in the agent (on VMs where page faults are slow, a fork of the agent took as
// long as the rest of the launch). The child runs only async-signal-safe calls on buffers the
// parent prepared; it starts with every signal blocked and resets every handled signal to its
// default before unblocking, so that no agent handler ever runs in it. An exec failure travels
// back as an errno through a CLOEXEC pipe (EOF on that pipe means exec succeeded). Sanitizer
// builds fork instead: their runtimes do not expect code on a foreign stack in a shared memory.

#include "agent/process/process_spawner.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "agent/process/orphan_guard.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr std::string_view kDefaultPath = "/bin:/usr/bin";

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kShareMemoryWithChild = false;
#else
constexpr bool kShareMemoryWithChild = true;
#endif

constexpr std::size_t kBitsPerWord = sizeof(unsigned long) * 8;

// The child's stack while it shares the agent's memory: exec_child needs a few hundred bytes.
constexpr std::size_t kChildStackBytes = 64 * 1024;

std::string_view path_of(const std::vector<std::string>& env) {
  for (const auto& entry : env) {
    if (entry.starts_with("PATH=")) return std::string_view(entry).substr(5);
  }
  return kDefaultPath;
}

// execvp's lookup, done in the parent: the worker's own PATH, an empty entry meaning ".".
std::string resolve_program(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string_view path = path_of(env);
  while (true) {
    const size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    std::string candidate = dir.empty() ? name : fmt::format("{}/{}", dir, name);
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  throw IoError(fmt::format("cannot start worker program '{}': not found in PATH", name));
}

[[noreturn]] void write_errno_and_exit(int fd, int error) {
  const ssize_t ignored = ::write(fd, &error, sizeof error);
  (void)ignored;
  ::_exit(127);
}

// What the child needs, prepared by the parent.
struct ChildPlan {
  const char* program;
  char* const* argv;
  char* const* envp;
  pid_t parent;
  ChildSetup setup;
  int status_fd;       // the CLOEXEC pipe's write end
  int status_read_fd;  // its read end: the parent's, closed in the child
};

// Marks every descriptor from 3 up close-on-exec but `keep` (-1: none); where the kernel has no
// CLOSE_RANGE_CLOEXEC, closes them now instead, sparing `status` (which must close at exec).
void close_at_exec_all_but(int keep, int status) {
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) {
    if (keep >= 0) ::fcntl(keep, F_SETFD, 0);
    return;
  }
  int spared[2] = {status, keep >= 0 ? keep : status};
  if (spared[0] > spared[1]) std::swap(spared[0], spared[1]);
  unsigned from = 3;
  for (int fd : spared) {
    if (static_cast<unsigned>(fd) > from) ::close_range(from, static_cast<unsigned>(fd) - 1, 0);
    from = static_cast<unsigned>(fd) + 1;
  }
  ::close_range(from, ~0U, 0);
}

// Handlers are the agent's code: in a child that shares the agent's memory one must never run.
// Every handled signal goes back to its default (as exec would do) while all are still blocked;
// SIGPIPE and SIGXFSZ, which the agent ignores, too.
void reset_signal_handlers() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    const bool handled = (current.sa_flags & SA_SIGINFO) != 0 ||
                         (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN);
    if (handled || sig == SIGPIPE || sig == SIGXFSZ) ::sigaction(sig, &dfl, nullptr);
  }
}

// Runs in the child: async-signal-safe calls only, on raw descriptors (::close, never UniqueFd):
// the child shares the agent's memory, so it must not run destructors or touch owned objects.
[[noreturn]] void exec_child(const ChildPlan& plan) {
  const ChildSetup& setup = plan.setup;
  ::close(plan.status_read_fd);
  ::setpgid(0, 0);
  if (setup.guard_socket >= 0) OrphanGuard::add_self(setup.guard_socket);
  if (setup.dies_with_agent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) write_errno_and_exit(plan.status_fd, errno);
    // The parent may have died between clone and prctl: then no death signal will ever come.
    if (::getppid() != plan.parent) ::_exit(127);
  }
  reset_signal_handlers();
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (setup.stdout_fd >= 0 && ::dup2(setup.stdout_fd, STDOUT_FILENO) < 0) {
    write_errno_and_exit(plan.status_fd, errno);
  }
  if (setup.stderr_fd >= 0 && ::dup2(setup.stderr_fd, STDERR_FILENO) < 0) {
    write_errno_and_exit(plan.status_fd, errno);
  }
  if (setup.stdin_fd >= 0 && ::dup2(setup.stdin_fd, STDIN_FILENO) < 0) {
    write_errno_and_exit(plan.status_fd, errno);
  }
  // dup2 onto itself keeps FD_CLOEXEC (our pipes have it): clear it explicitly then.
  if (setup.stdout_fd == STDOUT_FILENO) ::fcntl(STDOUT_FILENO, F_SETFD, 0);
  if (setup.stderr_fd == STDERR_FILENO) ::fcntl(STDERR_FILENO, F_SETFD, 0);
  // --numa_binding: the masks were built by the parent; these are two plain syscalls.
  if (setup.placement != nullptr) {
    const CpuPlacement& place = *setup.placement;
    if (::sched_setaffinity(0, place.cpu_mask.size() * sizeof(unsigned long),
                            reinterpret_cast<const cpu_set_t*>(place.cpu_mask.data())) != 0) {
      write_errno_and_exit(plan.status_fd, errno);
    }
    if (!place.node_mask.empty()) {  // the kernel reads maxnode - 1 bits
      ::syscall(SYS_set_mempolicy, MPOL_PREFERRED, place.node_mask.data(),
                place.node_mask.size() * kBitsPerWord + 1);
    }
  }
  // Every other inherited descriptor (store sockets, other workers' pipes) closes at exec; the
  // status pipe too, which is what tells the parent exec succeeded.
  close_at_exec_all_but(setup.pass_fd, plan.status_fd);
  ::execve(plan.program, plan.argv, plan.envp);
  write_errno_and_exit(plan.status_fd, errno);
}

int child_entry(void* plan) { exec_child(*static_cast<const ChildPlan*>(plan)); }

// Starts the child with every signal blocked (the calling thread's mask is restored after).
// Returns its pid, or -1 with errno set.
pid_t start_child(const ChildPlan& plan) {
  sigset_t all;
  sigset_t old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = -1;
  if constexpr (kShareMemoryWithChild) {
    const auto stack = std::make_unique_for_overwrite<std::byte[]>(kChildStackBytes);
    // The stack grows down: the child starts at its (16-byte aligned) top.
    void* top = stack.get() + kChildStackBytes;
    pid = ::clone(child_entry, top, CLONE_VM | CLONE_VFORK | SIGCHLD,
                  const_cast<ChildPlan*>(&plan));
  } else {
    pid = ::fork();
    if (pid == 0) exec_child(plan);
  }
  const int saved_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
  return pid;
}

}  // namespace

CpuPlacement CpuPlacement::of(const std::set<int>& cpus, int memory_node) {
  CpuPlacement place;
  const auto set_bit = [](std::vector<unsigned long>& mask, int bit) {
    const auto index = static_cast<std::size_t>(bit) / kBitsPerWord;
    // sched_setaffinity wants at least a whole cpu_set_t's worth of words.
    mask.resize(std::max({mask.size(), index + 1, sizeof(cpu_set_t) / sizeof(unsigned long)}));
    mask[index] |= 1UL << (static_cast<std::size_t>(bit) % kBitsPerWord);
  };
  for (int cpu : cpus) set_bit(place.cpu_mask, cpu);
  if (memory_node >= 0) set_bit(place.node_mask, memory_node);
  return place;
}

ExecImage::ExecImage(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty() || argv.front().empty()) {
    throw IoError("cannot start worker: empty command line");
  }
  name_ = argv.front();
  program_ = resolve_program(name_, env);
  argv_.reserve(argv.size() + 1);
  for (const auto& arg : argv) argv_.push_back(const_cast<char*>(arg.c_str()));
  argv_.push_back(nullptr);
  envp_.reserve(env.size() + 1);
  for (const auto& entry : env) envp_.push_back(const_cast<char*>(entry.c_str()));
  envp_.push_back(nullptr);
}

ForkedChild::ForkedChild(const ExecImage& image, int stdout_fd, int stderr_fd,
                         int guard_socket)
    : ForkedChild(image, ChildSetup{.stdout_fd = stdout_fd,
                                    .stderr_fd = stderr_fd,
                                    .guard_socket = guard_socket}) {}

ForkedChild::ForkedChild(const ExecImage& image, const ChildSetup& setup) {
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("cannot start worker '{}': pipe: {}", image.name(),
                              std::strerror(errno)));
  }
  const ChildPlan plan{.program = image.program_.c_str(),
                       .argv = image.argv_.data(),
                       .envp = image.envp_.data(),
                       .parent = ::getpid(),
                       .setup = setup,
                       .status_fd = status_pipe[1],
                       .status_read_fd = status_pipe[0]};
  UniqueFd status_read(status_pipe[0]);
  UniqueFd status_write(status_pipe[1]);
  const pid_t pid = start_child(plan);
  const int start_errno = errno;
  status_write.reset();
  if (pid < 0) {
    throw IoError(fmt::format("cannot start worker '{}': {}: {}", image.name(),
                              kShareMemoryWithChild ? "clone" : "fork",
                              std::strerror(start_errno)));
  }
  // Also set the group from this side, so that it exists before start() returns whatever the
  // child's scheduling (EACCES once the child has exec'd is fine: it did it itself).
  ::setpgid(pid, pid);
  pid_ = pid;
  exec_status_fd_ = std::move(status_read);
}

ForkedChild::~ForkedChild() = default;

int ForkedChild::await_exec() {
  int error = 0;
  ssize_t n;
  do {
    n = ::read(exec_status_fd_.get(), &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  exec_status_fd_.reset();
  return n == static_cast<ssize_t>(sizeof error) ? error : 0;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool signal_process_group(pid_t pgid, int signal) {
  return pgid > 0 && ::kill(-pgid, signal) == 0;
}

namespace {
pid_t g_child_subreaper_pid = 0;  // fork does not inherit the attribute
}  // namespace

void make_child_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    throw IoError(fmt::format("prctl(PR_SET_CHILD_SUBREAPER): {}", std::strerror(errno)));
  }
  g_child_subreaper_pid = ::getpid();
}

bool is_child_subreaper() { return g_child_subreaper_pid == ::getpid(); }

bool reap_process(pid_t pid, bool block) {
  while (true) {
    const pid_t r = ::waitpid(pid, nullptr, block ? 0 : WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno == EINTR) continue;
    return r < 0;  // ECHILD: already reaped elsewhere
  }
}

}  // namespace ddp::agent
