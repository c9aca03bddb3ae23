// The store server's memory bounds without sockets: OutputQueue shares large values and frees what
// is written, KeyTable's APPEND is amortised linear and never changes a shared value, the session
// refuses an APPEND or a reply past the value limit; the OS helpers (keepalive, spare descriptor).

#include "ddp/error.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store_server/server_os.hpp"
#include "rendezvous/store_server/server_output_queue.hpp"
#include "rendezvous/store_server/server_session.hpp"
#include "tests/unit/rendezvous/store_server/session_peer.hpp"
#include "tests/unit/rendezvous/wire_fixtures.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

wire::Request request(wire::Command command, std::vector<std::string> keys,
                      std::vector<Bytes> values = {}) {
  wire::Request r;
  r.command = command;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

}  // namespace

TEST_CASE("a large value is queued by reference and released once written") {
  KeyTable table;
  table.set("/big", Bytes(1 << 20, 7));
  OutputQueue out;
  out.append(hex("01"));
  out.append_value(table.share("/big"));
  out.append_value(nullptr);
  CHECK(out.size() == 1 + 8 + (1 << 20) + 8);
  CHECK(table.share("/big").use_count() == 3);  // the table, the queue, this expression
  table.erase("/big");
  out.consume(1 + 8 + 1000);
  CHECK(out.size() == (1 << 20) - 1000 + 8);
  const auto rest = take_all(out);
  CHECK(rest.size() == (1 << 20) - 1000 + 8);
  CHECK(rest.front() == 7);
  CHECK(out.empty());
}

TEST_CASE("small replies coalesce into one piece") {
  OutputQueue out;
  for (int i = 0; i < 100; ++i) out.append(u64le(i));
  std::size_t pieces = 0;
  out.for_each_front(16, 1 << 20, [&](std::span<const std::uint8_t> piece) {
    ++pieces;
    CHECK(piece.size() == 800);
  });
  CHECK(pieces == 1);
}

TEST_CASE("APPEND grows a value in place, amortised linear") {
  KeyTable table;
  const Bytes piece(1024, 1);
  std::size_t moves = 0;
  const std::uint8_t* data = nullptr;
  for (int i = 0; i < 1000; ++i) {
    table.append("/log", piece);
    if (table.find("/log")->data() != data) ++moves;
    data = table.find("/log")->data();
  }
  CHECK(table.find("/log")->size() == 1000 * 1024);
  CHECK(moves < 20);  // doubling: about log2(1000) reallocations, not 1000 copies
}

TEST_CASE("APPEND never changes a value a reply still holds") {
  KeyTable table;
  table.set("/k", to_bytes("abc"));
  const SharedValue held = table.share("/k");
  table.append("/k", to_bytes("def"));
  CHECK(to_string(*held) == "abc");
  CHECK(to_string(*table.find("/k")) == "abcdef");
}

TEST_CASE("APPEND and MULTI_GET past the value limit cannot be served") {
  KeyTable table;
  ServerSession session(table, [](wire::Buffer) {}, wire::Limits{.max_value_bytes = 1000});
  OutputQueue out;
  session.handle(request(wire::Command::kAppend, {"/a"}, {Bytes(600, 1)}), out);
  CHECK_THROWS_WITH(session.handle(request(wire::Command::kAppend, {"/a"}, {Bytes(600, 1)}), out),
                    Catch::Contains("APPEND(/a): 600 + 600 bytes exceed the value limit of 1000"));
  CHECK(table.find("/a")->size() == 600);
  session.handle(request(wire::Command::kMultiGet, {"/a"}), out);
  CHECK(out.size() == 608);
  CHECK_THROWS_WITH(session.handle(request(wire::Command::kMultiGet, {"/a", "/a"}), out),
                    Catch::Contains("MULTI_GET of 2 keys: the reply of 1216 bytes exceeds the "
                                    "value limit of 1000 bytes"));
}

TEST_CASE("keepalive on an accepted socket detects a dead peer within the time given") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  set_keepalive(fd, std::chrono::seconds(8));
  auto option = [fd](int level, int name) {
    int value = 0;
    socklen_t size = sizeof value;
    ::getsockopt(fd, level, name, &value, &size);
    return value;
  };
  CHECK(option(SOL_SOCKET, SO_KEEPALIVE) == 1);
  const int idle = option(IPPROTO_TCP, TCP_KEEPIDLE);
  const int interval = option(IPPROTO_TCP, TCP_KEEPINTVL);
  const int count = option(IPPROTO_TCP, TCP_KEEPCNT);
  CHECK(idle + interval * count <= 8);
  CHECK(option(IPPROTO_TCP, TCP_USER_TIMEOUT) == 8000);
  ::close(fd);
}

TEST_CASE("the spare descriptor refuses one pending connection") {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 8) == 0);
  socklen_t size = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size);
  SpareDescriptor spare;
  CHECK_FALSE(spare.refuse_one(listener));  // nothing pending
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  CHECK(spare.refuse_one(listener));
  char byte = 0;
  CHECK(::recv(client, &byte, 1, 0) <= 0);  // closed by the server: EOF or reset
  ::close(client);
  ::close(listener);
}
