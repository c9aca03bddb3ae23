#pragma once
// ScriptedAgent: the agent's end of the --recovery=inprocess hand-over channel, for tests of its
// worker side (ddp::ReformClient, ddp-train's RecoverySession): a listening Unix socket in the
// abstract namespace that the test accepts on, reads the worker's lines from and writes places
// to, on the test's thread.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <string>

#include "common/reform_protocol.hpp"

namespace ddp::test {

// The agent's end: listens at "@ddp-reform-test-<pid>-<n>", accepts one worker.
class ScriptedAgent {
 public:
  ScriptedAgent() {
    static std::atomic<int> counter{0};
    address_ = "@ddp-reform-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path + 1, address_.data() + 1, address_.size() - 1);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&sa), len) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
  }
  ~ScriptedAgent() {
    if (worker_ >= 0) ::close(worker_);
    ::close(listener_);
  }
  const std::string& address() const { return address_; }
  void accept() { worker_ = ::accept(listener_, nullptr, nullptr); }
  std::string read_line() {
    std::string line;
    char c;
    while (::read(worker_, &c, 1) == 1 && c != '\n') line += c;
    return line;
  }
  void send_place(int round, const std::string& rank) {
    send_place(round, std::map<std::string, std::string>{{"RANK", rank}});
  }
  void send_place(int round, const std::map<std::string, std::string>& env) {
    const std::string line = ddp::reform::encode_place({round, env});
    REQUIRE(::write(worker_, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  }
  void hang_up() {
    ::close(worker_);
    worker_ = -1;
  }

 private:
  std::string address_;
  int listener_ = -1;
  int worker_ = -1;
};

}  // namespace ddp::test
