// FanoutSupervisor: ssh children, their output, signals and the job's end, all on one thread.
// A host's agent learns of a stop from a signal name on its stdin; it learns that this ddprun is
// gone from EOF on the same stdin (ssh dies with us: PR_SET_PDEATHSIG), so neither a stop nor a
// crash here leaves an agent or a worker behind on any host.

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "agent/core/signal_names.hpp"
#include "agent/hostfile/fanout_supervisor.hpp"
#include "agent/process/child_watch.hpp"
#include "agent/process/output_router.hpp"
#include "agent/process/process_spawner.hpp"
#include "common/log.hpp"
#include "common/unique_fd.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {

namespace asio = boost::asio;

namespace {

constexpr int kSshFailed = 255;  // ssh's exit code for its own errors
constexpr std::size_t kReadBuffer = 64 * 1024;

struct Host {
  RemoteLaunch launch;
  pid_t pid = -1;
  UniqueFd stdin_fd;  // write end of the ssh's stdin pipe
  std::shared_ptr<OutputRouter> out;
  std::shared_ptr<OutputRouter> err;
  bool exited = false;
  bool stop_sent = false;  // told to stop: its exit code is ours, not a root cause
  int code = 0;
  std::string ssh_error;  // set when ssh itself failed or was killed: the connection is gone
};

int exit_code_of(const ChildStatus& status) {
  return status.signal != 0 ? 128 + status.signal : status.exit_code;
}

// The last non-empty line of ssh's stderr: ssh's own message when the connection failed.
std::string last_line(const OutputRouter& err) {
  const auto lines = err.tail_lines();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (!it->empty()) return *it;
  }
  return "(no message)";
}

// What went wrong with the connection itself, or "" when ssh ended with the agent's own code.
std::string ssh_error_of(const ChildStatus& status, const OutputRouter& err) {
  if (status.signal != 0) return fmt::format("ssh was killed by {}", signal_name(status.signal));
  if (status.exit_code == kSshFailed) {
    return fmt::format("ssh failed (exit {}): {}", kSshFailed, last_line(err));
  }
  return "";
}

}  // namespace

std::size_t root_cause_index(const std::vector<int>& failure_codes) {
  // A host whose job ended on another node exits 1, and may do so before the host where a
  // worker failed has reported: a later code other than 1 is the cause.
  for (std::size_t i = 0; i < failure_codes.size(); ++i) {
    if (failure_codes[i] != 1) return i;
  }
  return 0;
}

struct FanoutSupervisor::Impl {
  asio::io_context& io;
  std::vector<Host> hosts;
  std::vector<std::string> env;
  FanoutOptions options;
  std::vector<char> buffer = std::vector<char>(kReadBuffer);
  asio::signal_set signals;
  asio::steady_timer peer_timer;
  asio::steady_timer kill_timer;
  bool kill_timer_armed = false;
  int local_signal = 0;
  std::vector<std::size_t> failures;  // hosts that ended non-zero on their own, in order
  std::size_t running = 0;
  ChildWatch watch;  // last: its handler uses the members above

  Impl(asio::io_context& io_context, std::vector<RemoteLaunch> launches,
       std::vector<std::string> environment, FanoutOptions opts)
      : io(io_context),
        env(std::move(environment)),
        options(opts),
        signals(io_context, SIGINT, SIGTERM, SIGHUP),
        peer_timer(io_context),
        kill_timer(io_context),
        watch(io_context, [this](const ChildStatus& s) { on_exit(s); }) {
    signals.add(SIGQUIT);
    for (auto& launch : launches) {
      Host host;
      host.launch = std::move(launch);
      hosts.push_back(std::move(host));
    }
  }

  ~Impl() {
    for (Host& host : hosts) {
      host.stdin_fd.reset();
      // Only reached with ssh still running when run() threw: end it, and its agent with it.
      if (!host.exited && host.pid > 0) {
        signal_process_group(host.pid, SIGKILL);
        reap_process(host.pid, true);
      }
    }
  }

  ExecImage image_of(const std::vector<std::string>& argv) const {
    try {
      return ExecImage(argv, env);
    } catch (const IoError&) {
      throw ConfigError(fmt::format("--ssh: '{}' is not a program found here", argv.front()));
    }
  }

  void start(Host& host) {
    const std::string& name = host.launch.address;
    OutputRoute out_route;
    out_route.console_fd = STDOUT_FILENO;
    out_route.console_prefix = fmt::format("[{}]: ", name);
    out_route.labelled = fmt::format("[{}:", name);
    OutputRoute err_route = out_route;
    err_route.console_fd = STDERR_FILENO;
    err_route.keep_tail = true;
    host.out = std::make_shared<OutputRouter>(io, out_route, buffer);
    host.err = std::make_shared<OutputRouter>(io, err_route, buffer);
    // Resolved first: a bad --ssh is the user's error, and no pipe is open yet to leak.
    const ExecImage image = image_of(host.launch.argv);
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0) {
      throw IoError(
          fmt::format("host {}: cannot create ssh's stdin pipe: {}", name, std::strerror(errno)));
    }
    host.stdin_fd.reset(in[1]);
    UniqueFd ssh_stdin(in[0]);
    ForkedChild child(image, ChildSetup{.stdout_fd = host.out->child_end(),
                                        .stderr_fd = host.err->child_end(),
                                        .stdin_fd = ssh_stdin.get()});
    ssh_stdin.reset();
    host.pid = child.pid();
    watch.watch(host.pid);
    ++running;
    host.out->close_child_end();
    host.err->close_child_end();
    if (const int error = child.await_exec(); error != 0) {
      throw IoError(
          fmt::format("host {}: cannot start {}: {}", name, image.program(), std::strerror(error)));
    }
    host.out->start();
    host.err->start();
    log::get("agent")->debug("host {} started node_rank={} pid={}", name, host.launch.node_rank,
                             host.pid);
  }

  // Tells a host's agent to act as if it got `signal`. A host whose ssh is gone gets nothing.
  void send_signal(Host& host, int signal) {
    if (host.exited || !host.stdin_fd) return;
    host.stop_sent = true;
    const std::string line = signal_name(signal) + "\n";
    if (::write(host.stdin_fd.get(), line.data(), line.size()) < 0) {  // EPIPE: ssh ended
      host.stdin_fd.reset();
    }
  }

  void stop_all(int signal) {
    for (Host& host : hosts) send_signal(host, signal);
    arm_kill_timer();
  }

  // The last resort after a stop: kill the ssh connections; each agent then reads EOF.
  void arm_kill_timer() {
    if (kill_timer_armed) return;
    kill_timer_armed = true;
    kill_timer.expires_after(options.stop_deadline);
    kill_timer.async_wait([this](boost::system::error_code ec) {
      if (ec) return;
      for (Host& host : hosts) {
        if (host.exited) continue;
        log::get("agent")->warn("host {} did not stop within {} s: closing its ssh connection",
                                host.launch.address, options.stop_deadline.count() / 1000.0);
        signal_process_group(host.pid, SIGKILL);
      }
    });
  }

  void wait_signal() {
    signals.async_wait([this](boost::system::error_code ec, int signal) {
      if (ec) return;
      if (local_signal == 0) local_signal = signal;
      log::get("agent")->warn("received {}: forwarding it to the agent on every host",
                              signal_name(signal));
      stop_all(signal);
      wait_signal();
    });
  }

  void on_exit(const ChildStatus& status) {
    Host* found = nullptr;
    for (Host& host : hosts) {
      if (host.pid == status.pid && !host.exited) found = &host;
    }
    if (found == nullptr) return;
    Host& host = *found;
    host.exited = true;
    host.code = exit_code_of(status);
    host.out->drain_and_flush();
    host.err->drain_and_flush();
    host.ssh_error = ssh_error_of(status, *host.err);
    host.stdin_fd.reset();
    --running;
    if (host.code == 0 || host.stop_sent || local_signal != 0) {
      log::get("agent")->info("host {} ended exit_code={}", host.launch.address, host.code);
    } else {
      failures.push_back(static_cast<std::size_t>(&host - hosts.data()));
      on_failure(host);
    }
    if (running == 0) finish();
  }

  void on_failure(Host& host) {
    const auto log = log::get("agent");
    if (!host.ssh_error.empty()) {
      // The connection failed or broke: the host's agent never ran or has stopped on its stdin's
      // EOF, and the others would wait for it until their rendezvous timeout.
      log->error("host {}: {}; stopping the other hosts", host.launch.address, host.ssh_error);
      stop_all(SIGTERM);
      return;
    }
    if (failures.size() > 1) {  // the grace of the first failure runs already
      log->info("host {} ended exit_code={}", host.launch.address, host.code);
      return;
    }
    log->error("host {} failed exit_code={}; the other hosts have {} s to end on their own",
               host.launch.address, host.code, options.peer_grace.count() / 1000.0);
    peer_timer.expires_after(options.peer_grace);
    peer_timer.async_wait([this](boost::system::error_code ec) {
      if (!ec && running > 0) stop_all(SIGTERM);
    });
  }

  void finish() {
    boost::system::error_code ignored;
    signals.cancel(ignored);
    peer_timer.cancel();
    kill_timer.cancel();
    io.stop();
  }

  int exit_code() const {
    if (local_signal != 0) return 128 + local_signal;
    if (failures.empty()) return 0;
    std::vector<int> codes;
    for (const std::size_t i : failures) codes.push_back(hosts[i].code);
    const Host& host = hosts[failures[root_cause_index(codes)]];
    if (!host.ssh_error.empty()) {
      std::fflush(stdout);
      fmt::print(stderr, "ddprun: error: host {}: {}\n", host.launch.host, host.ssh_error);
    }
    return host.code;
  }
};

FanoutSupervisor::FanoutSupervisor(asio::io_context& io, std::vector<RemoteLaunch> launches,
                                   std::vector<std::string> env, FanoutOptions options)
    : impl_(std::make_unique<Impl>(io, std::move(launches), std::move(env), options)) {}

FanoutSupervisor::~FanoutSupervisor() = default;

int FanoutSupervisor::run() {
  impl_->wait_signal();
  for (Host& host : impl_->hosts) impl_->start(host);
  log::get("agent")->info("started the job on {} host(s)", impl_->hosts.size());
  impl_->io.run();
  return impl_->exit_code();
}

}  // namespace ddp::agent
