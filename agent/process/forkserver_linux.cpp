// ForkServer on Linux: the template is started like a worker (vfork-style clone + exec, its own
// process group, parent-death signal, guarded), with its end of a SOCK_SEQPACKET pair passed
// across exec. Packets keep message boundaries, so neither side frames anything. The template
// reports a worker's pid only once the worker is the agent's child (forked as such, or its
// middle process reaped), so waitid on its pidfd never sees ECHILD. The go pipe makes the rest
// race-free: the worker runs nothing of its own until the agent has set its process group,
// registered that group with the orphan guard and is watching it.

#include "agent/process/forkserver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/process/orphan_guard.hpp"
#include "agent/process/process_spawner.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

using namespace boost::asio::experimental::awaitable_operators;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kTemplateProgram = "from ddprun._forkserver import main; main()";
constexpr milliseconds kPidTimeout{60000};
// Room in the template's command line (a last argument of spaces) that each forked worker
// overwrites with its own command, so ps and pgrep -f show what runs.
constexpr std::size_t kCommandLineRoom = 4096;
constexpr std::size_t kMaxMessageBytes = 64 * 1024;  // the template's messages are small

// ddprun's per-worker variables the template keeps: the imports may read them.
constexpr std::array kKeptWorkerVariables = {"PYTHONPATH", "OMP_NUM_THREADS",
                                             "NCCL_ASYNC_ERROR_HANDLING",
                                             "TORCH_NCCL_ASYNC_ERROR_HANDLING"};

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

void send_with_fds(int socket, const std::string& payload, const std::array<int, 3>& fds) {
  iovec iov{const_cast<char*>(payload.data()), payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * 3);
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * 3);
  ssize_t sent;
  do {
    sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    throw IoError(fmt::format("forkserver: sending a request to the template: {}",
                              std::strerror(errno)));
  }
}

std::string joined_preload(const ForkServerOptions& options) {
  std::string preload;
  for (const auto& name : options.preload) preload += (preload.empty() ? "" : ",") + name;
  return preload;
}

}  // namespace

std::vector<std::string> template_env(const WorkerSpec& first) {
  std::vector<std::string> env;
  for (const std::string& entry : first.env) {
    const std::string key = entry.substr(0, entry.find('='));
    const bool per_worker = first.ddprun_env.count(key) != 0 &&
                            std::find(kKeptWorkerVariables.begin(), kKeptWorkerVariables.end(),
                                      key) == kKeptWorkerVariables.end();
    if (!per_worker) env.push_back(entry);
  }
  return env;
}

ForkServer::ForkServer(const ForkServerOptions& options, const std::vector<std::string>& env)
    : options_(options), started_(std::chrono::steady_clock::now()) {
  try {
    start(env);
  } catch (const IoError& e) {
    failure_ = e.what();  // await_ready() reports it, when the first launch needs the template
  }
}

void ForkServer::start(const std::vector<std::string>& env) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    throw IoError(fmt::format("forkserver: socketpair: {}", std::strerror(errno)));
  }
  socket_.reset(pair[0]);
  UniqueFd theirs(pair[1]);
  const std::vector<std::string> argv{options_.python, "-u", "-c", kTemplateProgram,
                                      std::to_string(theirs.get()), joined_preload(options_),
                                      std::string(kCommandLineRoom, ' ')};
  const ExecImage image(argv, env);
  ForkedChild child(image, ChildSetup{.guard_socket = OrphanGuard::instance().socket(),
                                      .pass_fd = theirs.get()});
  pid_ = child.pid();
  if (const int error = child.await_exec(); error != 0) {
    reap_process(pid_, true);
    pid_ = -1;
    throw IoError(fmt::format("forkserver: exec {}: {}", image.program(), std::strerror(error)));
  }
}

void ForkServer::await_ready() {
  if (ready_) return;
  if (has_failed()) throw IoError(failure_);
  try {
    read_ready_message();
  } catch (const IoError& e) {
    failure_ = e.what();
    kill_template();
    throw;
  }
  ready_ = true;
}

boost::asio::awaitable<void> ForkServer::until_ready() {
  if (ready_ || has_failed()) co_return;
  // A duplicate to wait on: the descriptor object closes what it holds, and the socket stays
  // this object's (its blocking reads go on after the wait).
  const int watched = ::fcntl(socket_.get(), F_DUPFD_CLOEXEC, 0);
  if (watched < 0) co_return;  // await_ready() then blocks instead
  const auto executor = co_await boost::asio::this_coro::executor;
  boost::asio::posix::stream_descriptor readable(executor, watched);
  boost::asio::steady_timer deadline(executor, ready_deadline());
  const auto wait = boost::asio::as_tuple(boost::asio::use_awaitable);
  co_await (readable.async_wait(boost::asio::posix::stream_descriptor::wait_read, wait) ||
            deadline.async_wait(wait));
}

void ForkServer::read_ready_message() {
  const auto left = std::chrono::duration_cast<milliseconds>(ready_deadline() -
                                                             std::chrono::steady_clock::now());
  const char* waiting_for = "importing the preload modules";
  pollfd readable{socket_.get(), POLLIN, 0};
  if (left.count() <= 0 && ::poll(&readable, 1, 0) == 0) {
    fail_silent(options_.ready_timeout, waiting_for);  // until_ready() waited the whole time
  }
  const json ready =
      json::parse(receive(std::max(left, milliseconds(0)), waiting_for), nullptr, false);
  if (ready.is_discarded() || !ready.contains("ready")) {
    throw IoError("forkserver: the template's ready message is not valid");
  }
  if (!ready.value("ready", false)) {
    throw IoError(fmt::format("forkserver: {}", ready.value("error", std::string("failed"))));
  }
  if (ready.value("cuda_initialized", false)) {
    throw IoError(
        "forkserver: importing the preload modules initialised CUDA in the template "
        "(torch.cuda.is_initialized() is true there); forked workers could not use it");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const std::string preload = joined_preload(options_);
  log::get("agent")->info("forkserver ready pid={} preload={} threads={} seconds={:.3f}", pid_,
                          preload.empty() ? "-" : preload, ready.value("threads", 0), seconds);
}

ForkServer::~ForkServer() { kill_template(); }

void ForkServer::kill_template() {
  socket_.reset();
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    reap_process(pid_, true);
    OrphanGuard::instance().remove(pid_);
    pid_ = -1;
  }
}

bool runs_in_template(const ForkServerOptions& options, const std::vector<std::string>& argv) {
  if (argv.size() < 3 || argv[0] != options.python || argv[1] != "-u") return false;
  if (argv[2] == "-m" || argv[2] == "-c") return argv.size() >= 4;
  return !argv[2].starts_with("-");
}

bool ForkServer::is_alive() {
  if (pid_ > 0 && reap_process(pid_, false)) {
    OrphanGuard::instance().remove(pid_);
    pid_ = -1;
  }
  return pid_ > 0;
}

UniqueFd ForkServer::request(int id, const WorkerSpec& spec, int stdout_fd, int stderr_fd) {
  await_ready();
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("forkserver: pipe: {}", std::strerror(errno)));
  }
  UniqueFd go_read(go[0]);
  UniqueFd go_write(go[1]);
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  json message = {{"id", id},
                  {"argv", spec.argv},
                  {"env", spec.env},
                  {"cwd", ec ? std::string("/") : cwd.string()},
                  {"agent_pid", ::getpid()},
                  {"cpus", spec.numa.cpus},
                  {"memory_node", spec.numa.memory_node}};
  send_with_fds(socket_.get(), message.dump(), {stdout_fd, stderr_fd, go_read.get()});
  return go_write;
}

pid_t ForkServer::await_pid(int id) {
  while (true) {
    if (const auto it = reported_.find(id); it != reported_.end()) {
      const pid_t pid = it->second;
      reported_.erase(it);  // ids repeat in every attempt
      // The worker leads its own group before the agent registers that group anywhere. It sets
      // it itself too, but may not have run yet (forked as this process's child, nobody else
      // could); a worker reparented from a middle process has it already.
      ::setpgid(pid, pid);
      return pid;
    }
    const json reply = json::parse(receive(kPidTimeout, "forking a worker"), nullptr, false);
    if (reply.is_discarded() || !reply.contains("id")) {
      throw IoError("forkserver: the template sent a message that is not valid");
    }
    const int from = reply.value("id", -1);
    if (reply.contains("error")) {
      throw IoError(fmt::format("forkserver: cannot start worker local_rank={}: {}", from,
                                reply.value("error", std::string())));
    }
    reported_[from] = reply.value("pid", -1);
    through_middle_ = reply.value("middle", true);
  }
}

void ForkServer::release(UniqueFd& go) {
  const char byte = 1;
  ssize_t written;
  do {
    written = ::write(go.get(), &byte, 1);
  } while (written < 0 && errno == EINTR);
  go.reset();  // a worker that died in between only leaves an EPIPE here
}

std::string ForkServer::receive(milliseconds timeout, const char* waiting_for) {
  pollfd readable{socket_.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&readable, 1, static_cast<int>(std::min<long long>(timeout.count(), INT_MAX)));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) fail_silent(timeout, waiting_for);
  std::string buffer(kMaxMessageBytes, '\0');
  ssize_t n;
  do {
    n = ::recv(socket_.get(), buffer.data(), buffer.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) fail_exited(waiting_for);
  buffer.resize(static_cast<std::size_t>(n));
  return buffer;
}

void ForkServer::fail_silent(milliseconds waited, const char* waiting_for) {
  throw IoError(fmt::format("forkserver: the template (pid {}) said nothing for {}s while {}", pid_,
                            waited.count() / 1000, waiting_for));
}

void ForkServer::fail_exited(const char* waiting_for) {
  int status = 0;
  pid_t reaped = -1;
  while (pid_ > 0 && (reaped = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  const pid_t pid = pid_;
  OrphanGuard::instance().remove(pid_);
  pid_ = -1;
  throw IoError(fmt::format("forkserver: the template (pid {}) {} while {}", pid,
                            reaped == pid ? describe_exit(status) : "went away", waiting_for));
}

}  // namespace ddp::agent
