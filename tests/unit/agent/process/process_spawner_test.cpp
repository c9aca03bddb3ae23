// Starting workers (vfork-style clone + exec): PATH lookup, exec errors through the pipe,
// process groups, closed fds, signal dispositions.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/process/process_spawner.hpp"
#include "agent_test_util.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

int wait_exit_code(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("a bare program name is looked up in the worker's PATH", "[spawner]") {
  test::TempDir dir;
  const std::string tool = dir.file("my-tool");
  { std::ofstream(tool) << "#!/bin/sh\nexit 0\n"; }
  ::chmod(tool.c_str(), 0755);
  const std::vector<std::string> argv{"my-tool"};
  SECTION("found in a later entry") {
    const std::vector<std::string> env{"PATH=/nonexistent:" + dir.path()};
    CHECK(ExecImage(argv, env).program() == tool);
  }
  SECTION("not found") {
    const std::vector<std::string> env{"PATH=/nonexistent:/usr/bin"};
    CHECK_THAT(test::thrown_message<IoError>([&] { ExecImage image(argv, env); }),
               Catch::Matchers::Contains("'my-tool': not found in PATH"));
  }
  SECTION("a name with a slash is used as given") {
    const std::vector<std::string> path_argv{tool};
    CHECK(ExecImage(path_argv, {}).program() == tool);
  }
  CHECK_THROWS_AS(ExecImage({}, {}), IoError);
}

TEST_CASE("exec errors come back as an errno; success as 0", "[spawner]") {
  test::TempDir dir;
  const std::string not_executable = dir.file("data.txt");
  { std::ofstream(not_executable) << "x"; }
  const std::vector<std::string> bad_argv{not_executable};
  const std::vector<std::string> good_argv{"/bin/sh", "-c", "exit 4"};
  const ExecImage bad(bad_argv, {});
  const ExecImage good(good_argv, {});
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  ForkedChild failing(bad, null_fd, null_fd);
  CHECK(failing.await_exec() == EACCES);
  CHECK(wait_exit_code(failing.pid()) == 127);

  ForkedChild running(good, null_fd, null_fd);
  CHECK(running.await_exec() == 0);
  CHECK(wait_exit_code(running.pid()) == 4);
  ::close(null_fd);
}

TEST_CASE("the worker leads its own process group and inherits no descriptors", "[spawner]") {
  test::TempDir dir;
  const int leaked = ::open("/dev/null", O_RDONLY);  // no CLOEXEC on purpose
  const std::string out_path = dir.file("fds");
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const std::string probe = "test -e /proc/$$/fd/" + std::to_string(leaked) +
                            " && echo leaked || echo closed; ps -o pgid= -p $$ | tr -d ' '";
  const std::vector<std::string> argv{"/bin/sh", "-c", probe};
  const ExecImage image(argv, test::current_env());
  ForkedChild child(image, out_fd, out_fd);
  REQUIRE(child.await_exec() == 0);
  CHECK(wait_exit_code(child.pid()) == 0);
  ::close(leaked);
  ::close(out_fd);
  CHECK(test::read_file(out_path) == "closed\n" + std::to_string(child.pid()) + "\n");
}

void count_signal(int) {}

TEST_CASE("the worker starts with nothing blocked or ignored; the caller's mask is kept",
          "[spawner]") {
  // The agent handles some signals, ignores SIGPIPE and may block others in its threads; the
  // worker, which runs in the agent's memory until exec, must start clean.
  struct sigaction handled {};
  handled.sa_handler = count_signal;
  struct sigaction ignored {};
  ignored.sa_handler = SIG_IGN;
  struct sigaction old_usr1 {}, old_pipe {};
  ::sigaction(SIGUSR1, &handled, &old_usr1);
  ::sigaction(SIGPIPE, &ignored, &old_pipe);
  sigset_t blocked, old_mask;
  ::sigemptyset(&blocked);
  ::sigaddset(&blocked, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);

  test::TempDir dir;
  const std::string out_path = dir.file("status");
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  // grep reads its own status (exec): a shell that waits for a child blocks every signal while
  // it waits, so the shell's own status would show that mask, not the one the spawner left.
  const std::vector<std::string> argv{"/bin/sh", "-c",
                                      "exec grep -E '^Sig(Blk|Ign)' /proc/$$/status"};
  ForkedChild child(ExecImage(argv, test::current_env()), out_fd, out_fd);
  REQUIRE(child.await_exec() == 0);
  CHECK(wait_exit_code(child.pid()) == 0);
  ::close(out_fd);

  sigset_t now;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, &now);
  CHECK(::sigismember(&now, SIGUSR2) == 1);
  CHECK(::sigismember(&now, SIGINT) == ::sigismember(&old_mask, SIGINT));
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  CHECK(test::read_file(out_path) == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST_CASE("signal_process_group reports a group that is gone", "[spawner]") {
  const std::vector<std::string> argv{"/bin/sh", "-c", "exit 0"};
  const ExecImage image(argv, {});
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ForkedChild child(image, null_fd, null_fd);
  REQUIRE(child.await_exec() == 0);
  CHECK(reap_process(child.pid(), true));
  CHECK_FALSE(signal_process_group(child.pid(), 0));
  ::close(null_fd);
}

}  // namespace
}  // namespace ddp::agent
