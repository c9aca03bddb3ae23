// A guarded TcpStoreServer with real clients on loopback: an agent with the job secret is served
// in both dialects; a wrong secret fails its connect with one clear error; a raw TCPStore client
// and a replayed handshake are refused; a silent stranger is closed at the handshake deadline;
// a client with a secret still reaches a store that holds none; a members-only store whose list
// is still being filled holds a stranger until the list is settled.

#include <catch2/catch.hpp>

#include "ddp/error.hpp"
#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/net_address.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
#include "rendezvous/store_server/server_stats.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"
#include "tests/unit/rendezvous/auth/handshake_bytes.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;
using namespace std::chrono_literals;

using ddp::rdzv::auth::test::hello_without_address;

namespace {

const auto kJobSecret = std::make_shared<const auth::Credentials>(
    auth::Credentials{"the-job-secret-0123456789", "run-31"});

ConnectOptions with(std::shared_ptr<const auth::Credentials> credentials,
                    WireDialect dialect = WireDialect::kTorch2) {
  ConnectOptions options;
  options.connect_timeout = 2s;
  options.call_timeout = 2s;
  options.initial_backoff = 1ms;
  options.dialect = dialect;
  options.credentials = std::move(credentials);
  return options;
}


}  // namespace

TEST_CASE("an agent with the job secret is served in both dialects", "[auth][store]") {
  ServerThread server("127.0.0.1", {}, StoreGuard{kJobSecret, nullptr, nullptr});
  auto modern = BlockingStore::connect("127.0.0.1", server.port(), with(kJobSecret));
  modern->set("/k", to_bytes("v"));
  auto old = BlockingStore::connect("127.0.0.1", server.port(),
                                    with(kJobSecret, WireDialect::kTorch113));
  CHECK(to_string(old->get("/k")) == "v");
  CHECK(old->add("/n", 2) == 2);
}

TEST_CASE("a wrong secret or run id fails the connect with one clear error", "[auth][store]") {
  ServerThread server("127.0.0.1", {}, StoreGuard{kJobSecret, nullptr, nullptr});
  const auto refused_before = server_stats().handshakes_refused.load();
  std::shared_ptr<const auth::Credentials> wrong;
  SECTION("secret") {
    wrong = std::make_shared<const auth::Credentials>(
        auth::Credentials{"not-the-job-secret-987654", "run-31"});
  }
  SECTION("run id") {
    wrong = std::make_shared<const auth::Credentials>(auth::Credentials{kJobSecret->secret, "run-32"});
  }
  CHECK_THROWS_AS(BlockingStore::connect("127.0.0.1", server.port(), with(wrong)),
                  ddp::ConfigError);
  CHECK_THROWS_WITH(BlockingStore::connect("127.0.0.1", server.port(), with(wrong)),
                    Catch::Contains("refused this agent's job secret") &&
                        Catch::Contains("token_file"));
  CHECK(server_stats().handshakes_refused.load() >= refused_before + 2);
}

TEST_CASE("a TCPStore client without the handshake is refused on a store with a secret",
          "[auth][store]") {
  ServerThread server("127.0.0.1", {}, StoreGuard{kJobSecret, nullptr, nullptr});
  server.on_server([](TcpStoreServer& s) {
    s.store().table().set("/ddprun/run-31/closed", to_bytes("0"));
    return 0;
  });
  RawClient stranger(server.port());
  // 1.13 GET /ddprun/run-31/closed: no answer, the connection closes.
  stranger.send(cat({byte(2), str("/ddprun/run-31/closed")}));
  CHECK(stranger.is_closed_by_server());
  RawClient writer(server.port());
  writer.send(cat({byte(0), str("/ddprun/run-31/closed"), str("1")}));  // a forged close
  CHECK(writer.is_closed_by_server());
  CHECK(server.on_server([](TcpStoreServer& s) {
    return to_string(*s.store().table().find("/ddprun/run-31/closed"));
  }) == "0");
}

TEST_CASE("a handshake replayed on a new connection is refused", "[auth][store]") {
  ServerThread server("127.0.0.1", {}, StoreGuard{kJobSecret, nullptr, nullptr});
  RawClient agent(server.port());
  const ByteVec first = agent.call(hello_without_address(), 1 + auth::kChallengeBytes);
  const auth::Tag tag = auth::auth_tag(*kJobSecret, std::span(first).subspan(1));
  CHECK(agent.call(ByteVec(tag.begin(), tag.end()), 1) == hex("02"));
  // An eavesdropper replays the captured HELLO and tag: the new challenge makes the tag wrong.
  RawClient replay(server.port());
  const ByteVec second = replay.call(hello_without_address(), 1 + auth::kChallengeBytes);
  CHECK(second != first);
  CHECK(replay.call(ByteVec(tag.begin(), tag.end()), 1) == hex("03"));
  CHECK(replay.is_closed_by_server());
}

TEST_CASE("a stranger that never authenticates is closed at the handshake deadline",
          "[auth][store]") {
  StoreLimits limits;
  limits.handshake_timeout = 100ms;
  ServerThread server("127.0.0.1", limits, StoreGuard{kJobSecret, nullptr, nullptr});
  RawClient silent(server.port());
  CHECK(silent.is_closed_by_server());
}

TEST_CASE("a client with a secret reaches a store that holds none", "[auth][store]") {
  ServerThread server;
  auto store = BlockingStore::connect("127.0.0.1", server.port(), with(kJobSecret));
  store->set("/k", to_bytes("v"));
  CHECK(to_string(store->get("/k")) == "v");
}

TEST_CASE("a stranger to a members-only store whose list is unsettled waits for the list",
          "[auth][store]") {
  // A non-loopback address of this machine, so that the client is not a member by loopback.
  std::optional<asio::ip::address> own;
  for (const auto& address : local_addresses()) {
    if (address.is_v4() && !address.is_loopback()) own = address;
  }
  if (!own) {
    WARN("skipped: this machine has no IPv4 address but loopback");
    return;
  }
  auto members = auth::MemberList::create();
  members->set_unsettled();
  ServerThread server("0.0.0.0", {}, StoreGuard{nullptr, members, nullptr});
  RawClient node(server.port(), own->to_string());
  node.send(ByteVec{6});  // 1.13 GETNUMKEYS: 8 bytes back once served
  CHECK(node.is_silent_for(200));  // held, unread, while the round's members are read
  SECTION("the list comes to name it: served") {
    server.on_server([&](TcpStoreServer&) {
      members->add_fixed(*own);
      members->settle();
      return 0;
    });
    CHECK(node.recv(8).size() == 8);
  }
  SECTION("settled without it: refused") {
    server.on_server([&](TcpStoreServer&) {
      members->settle();
      return 0;
    });
    CHECK(node.is_closed_by_server());
  }
}
