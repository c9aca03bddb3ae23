// ddp::ReformClient against a scripted agent: a listening Unix socket in the abstract namespace
// that this test accepts on, reads the worker's lines from and writes places to.
#include <catch2/catch.hpp>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <string>

#include "common/reform_protocol.hpp"
#include "ddp/error.hpp"
#include "ddp/reform_client.hpp"

namespace {

using namespace std::chrono_literals;

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
    const std::string line = ddp::reform::encode_place({round, {{"RANK", rank}}});
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

}  // namespace

TEST_CASE("the client says hello, takes places newer than its round and reports reformed",
          "[reform]") {
  ScriptedAgent agent;
  ddp::ReformClient client(agent.address(), 2, 10s, nullptr);
  agent.accept();
  const auto hello = ddp::reform::parse_worker_line(agent.read_line());
  CHECK(hello.kind == ddp::reform::WorkerLine::Kind::kHello);
  CHECK(hello.local_rank == 2);
  CHECK(hello.pid == ::getpid());
  agent.send_place(0, "5");
  const ddp::ReformPlace first = client.wait_newer_than(-1);
  CHECK(first.round == 0);
  CHECK(first.env.at("RANK") == "5");
  CHECK_FALSE(client.newer_than(0).has_value());
  client.reformed(0);
  CHECK(agent.read_line() == "reformed 0");
  agent.send_place(1, "3");
  const ddp::ReformPlace second = client.wait_newer_than(0);
  CHECK(second.round == 1);
  CHECK(client.newer_than(0).has_value());
  CHECK_FALSE(client.newer_than(1).has_value());
}

TEST_CASE("a place the training thread does not take within the grace calls the handler once",
          "[reform]") {
  ScriptedAgent agent;
  std::promise<int> overdue;
  std::atomic<int> calls{0};
  ddp::ReformClient client(agent.address(), 0, 50ms, [&](int round) {
    if (calls++ == 0) overdue.set_value(round);
  });
  agent.accept();
  agent.read_line();
  agent.send_place(4, "0");
  auto future = overdue.get_future();
  REQUIRE(future.wait_for(10s) == std::future_status::ready);
  CHECK(future.get() == 4);
  CHECK(client.wait_newer_than(3).round == 4);
  CHECK(calls.load() == 1);
}

TEST_CASE("a place taken in time is never overdue", "[reform]") {
  ScriptedAgent agent;
  std::atomic<int> calls{0};
  ddp::ReformClient client(agent.address(), 0, 10s, [&](int) { ++calls; });
  agent.accept();
  agent.read_line();
  agent.send_place(0, "0");
  CHECK(client.wait_newer_than(-1).round == 0);
  CHECK(calls.load() == 0);
}

TEST_CASE("the agent hanging up fails the waits with IoError", "[reform]") {
  ScriptedAgent agent;
  ddp::ReformClient client(agent.address(), 0, 10s, nullptr);
  agent.accept();
  agent.read_line();
  agent.hang_up();
  CHECK_THROWS_AS(client.wait_newer_than(-1), ddp::IoError);
  CHECK_THROWS_AS(client.newer_than(-1), ddp::IoError);
}

TEST_CASE("a channel nobody listens at is an IoError naming it", "[reform]") {
  CHECK_THROWS_WITH(ddp::ReformClient("@ddp-reform-test-nobody-here", 0, 1s, nullptr),
                    Catch::Contains("ddp-reform-test-nobody-here"));
}
