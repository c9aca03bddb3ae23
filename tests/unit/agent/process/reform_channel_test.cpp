// ReformChannel over a real Unix socket: the test plays the worker with a raw client socket,
// speaking the lines of reform_channel.hpp.

#include "agent/process/reform_channel.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/agent/process/agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using test::run_until;
using test::run_until_done;
using test::TempDir;

// A worker's end: connects to `address` (a path, or "@name" for an abstract socket).
class FakeWorker {
 public:
  explicit FakeWorker(const std::string& address) : fd_(::socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::string name = address;
    if (!name.empty() && name[0] == '@') name[0] = '\0';
    std::memcpy(sun.sun_path, name.data(), name.size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                               (name[0] == '\0' ? 0 : 1));
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&sun), length) == 0);
  }
  ~FakeWorker() { close(); }

  void send(const std::string& line) {
    REQUIRE(::write(fd_, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Runs the agent's loop until a whole line arrived; returns it without its newline.
  std::string read_line(boost::asio::io_context& io) {
    const bool got = run_until(
        io,
        [&] {
          char chunk[4096];
          const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
          if (n > 0) buffer_.append(chunk, static_cast<std::size_t>(n));
          return buffer_.find('\n') != std::string::npos;
        },
        5s);
    REQUIRE(got);
    const std::size_t end = buffer_.find('\n');
    std::string line = buffer_.substr(0, end);
    buffer_.erase(0, end + 1);
    return line;
  }

 private:
  int fd_;
  std::string buffer_;
};

WorkerPlace place(int round, int local_rank, const std::string& rank) {
  return WorkerPlace{round, local_rank, {{"RANK", rank}, {"WORLD_SIZE", "2"}}};
}

TEST_CASE("reform channel: a hello gets the current place, publish sends the next one",
          "[reform_channel]") {
  boost::asio::io_context io;
  TempDir dir;
  ReformChannel channel(io, dir.file("reform.sock"));
  CHECK(channel.address() == dir.file("reform.sock"));
  channel.publish({place(3, 0, "4"), place(3, 1, "5")});

  CHECK(channel.connected_pid(1) == 0);  // no process has connected as local rank 1 yet
  FakeWorker worker(channel.address());
  worker.send("hello 1 4242\n");
  CHECK(worker.read_line(io) + "\n" == encode_place_line(place(3, 1, "5")));
  CHECK(channel.connected_pid(1) == 4242);
  CHECK(channel.connected_pid(0) == 0);
  CHECK(encode_place_line(place(3, 1, "5")) ==
        "place {\"env\":{\"RANK\":\"5\",\"WORLD_SIZE\":\"2\"},\"round\":3}\n");

  channel.publish({place(4, 0, "0"), place(4, 1, "1")});
  CHECK(worker.read_line(io).find("\"round\":4") != std::string::npos);
}

TEST_CASE("reform channel: the wait ends when every rank re-formed, is gone, or at the timeout",
          "[reform_channel]") {
  boost::asio::io_context io;
  TempDir dir;
  ReformChannel channel(io, dir.file("reform.sock"));
  channel.publish({place(1, 0, "0"), place(1, 1, "1")});
  FakeWorker first(channel.address());
  FakeWorker second(channel.address());
  first.send("hello 0 1\n");
  second.send("hello 1 2\n");
  first.read_line(io);
  second.read_line(io);

  SECTION("both report the round") {
    first.send("reformed 1\n");
    second.send("reformed 1\n");
    CHECK(run_until_done(io, channel.wait_reformed(1, {0, 1}, 5s)).empty());
  }
  SECTION("an earlier round's report does not count; a closed connection ends the wait") {
    first.send("reformed 0\n");
    second.send("reformed 1\n");
    first.close();
    CHECK(run_until_done(io, channel.wait_reformed(1, {0, 1}, 5s)) == std::vector<int>{0});
  }
  SECTION("a rank that never said hello cannot re-form: it is missing at once") {
    first.send("reformed 1\n");
    second.send("reformed 1\n");
    CHECK(run_until_done(io, channel.wait_reformed(1, {0, 1, 2}, 5s)) == std::vector<int>{2});
  }
  SECTION("a rank that stays silent is missing after the timeout") {
    first.send("reformed 1\n");
    const auto start = std::chrono::steady_clock::now();
    CHECK(run_until_done(io, channel.wait_reformed(1, {0, 1}, 200ms)) == std::vector<int>{1});
    CHECK(std::chrono::steady_clock::now() - start >= 200ms);
  }
}

TEST_CASE(
    "reform channel: a path too long for a socket address is served in the abstract "
    "namespace",
    "[reform_channel]") {
  boost::asio::io_context io;
  const std::string long_path = "/tmp/" + std::string(150, 'x') + "/reform.sock";
  ReformChannel channel(io, long_path);
  REQUIRE(channel.address().rfind("@ddprun-reform-", 0) == 0);
  channel.publish({place(0, 0, "0")});
  FakeWorker worker(channel.address());
  worker.send("hello 0 7\n");
  CHECK(worker.read_line(io).rfind("place ", 0) == 0);
}

}  // namespace
}  // namespace ddp::agent
