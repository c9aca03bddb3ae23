// fork/exec of workers. The child runs only async-signal-safe calls: the parent prepares every
// buffer before fork, and an exec failure travels back as an errno through a CLOEXEC pipe (EOF on
// that pipe means exec succeeded).

#include "agent/process_spawner.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "agent/orphan_guard.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

constexpr std::string_view kDefaultPath = "/bin:/usr/bin";

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

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

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* program, char* const* argv, char* const* envp,
                             pid_t parent, int stdout_fd, int stderr_fd, int status_fd,
                             int guard_socket) {
  ::setpgid(0, 0);
  if (guard_socket >= 0) OrphanGuard::add_self(guard_socket);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) write_errno_and_exit(status_fd, errno);
  // The parent may have died between fork and prctl: then no death signal will ever come.
  if (::getppid() != parent) ::_exit(127);
  sigset_t all;
  ::sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::sigaction(SIGXFSZ, &dfl, nullptr);
  if (::dup2(stdout_fd, STDOUT_FILENO) < 0 || ::dup2(stderr_fd, STDERR_FILENO) < 0) {
    write_errno_and_exit(status_fd, errno);
  }
  // dup2 onto itself keeps FD_CLOEXEC (our pipes have it): clear it explicitly then.
  if (stdout_fd == STDOUT_FILENO) ::fcntl(STDOUT_FILENO, F_SETFD, 0);
  if (stderr_fd == STDERR_FILENO) ::fcntl(STDERR_FILENO, F_SETFD, 0);
  // Every other inherited descriptor (store sockets, other workers' pipes) closes at exec; the
  // status pipe too, which is what tells the parent exec succeeded.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    ::close_range(3, static_cast<unsigned>(status_fd) - 1, 0);
    ::close_range(static_cast<unsigned>(status_fd) + 1, ~0U, 0);
  }
  ::execve(program, argv, envp);
  write_errno_and_exit(status_fd, errno);
}

}  // namespace

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
                         int guard_socket) {
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("cannot start worker '{}': pipe: {}", image.name(),
                              std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(status_pipe[0]);
    exec_child(image.program_.c_str(), image.argv_.data(), image.envp_.data(), parent, stdout_fd,
               stderr_fd, status_pipe[1], guard_socket);
  }
  const int fork_errno = errno;
  ::close(status_pipe[1]);
  if (pid < 0) {
    ::close(status_pipe[0]);
    throw IoError(fmt::format("cannot start worker '{}': fork: {}", image.name(),
                              std::strerror(fork_errno)));
  }
  // Also set the group from this side, so that it exists before start() returns whatever the
  // child's scheduling (EACCES once the child has exec'd is fine: it did it itself).
  ::setpgid(pid, pid);
  pid_ = pid;
  exec_status_fd_ = status_pipe[0];
}

ForkedChild::~ForkedChild() {
  if (exec_status_fd_ >= 0) ::close(exec_status_fd_);
}

int ForkedChild::await_exec() {
  int error = 0;
  ssize_t n;
  do {
    n = ::read(exec_status_fd_, &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  ::close(exec_status_fd_);
  exec_status_fd_ = -1;
  return n == static_cast<ssize_t>(sizeof error) ? error : 0;
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
