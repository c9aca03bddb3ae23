// LinkStoreGuard without sockets: with a secret the link store asks every connection to
// authenticate; without one it admits loopback and the nodes of the round this agent hosts, a
// list replaced each round and unsettled from the join until the round's records are read;
// worker_store_allow=any opens it.

#include <catch2/catch.hpp>

#include "rendezvous/etcd/etcd_link_guard.hpp"
#include "rendezvous/store_server/server_admission.hpp"

using ddp::rdzv::is_refused_at_accept;
using ddp::rdzv::etcd::LinkStoreGuard;
using boost::asio::ip::make_address;

TEST_CASE("a link store without a secret admits the nodes of the round its agent hosts",
          "[etcd][link_guard]") {
  LinkStoreGuard links(nullptr, true);
  const auto guard = links.guard();
  REQUIRE(guard.members);
  CHECK_FALSE(guard.credentials);
  CHECK(links.needs_members());
  const auto stranger = make_address("203.0.113.9");
  CHECK(is_refused_at_accept(guard, stranger));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("127.0.0.1")));

  links.open_round();  // joining round 0: strangers wait until the round's nodes are known
  CHECK_FALSE(guard.members->is_settled());
  links.admit_round({make_address("203.0.113.1"), make_address("203.0.113.2")});
  CHECK(guard.members->is_settled());
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.1")));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("::ffff:203.0.113.2")));
  CHECK(is_refused_at_accept(guard, stranger));

  links.open_round();  // round 1 keeps node 2, loses node 1, gains node 3
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.1")));  // until it is read
  links.admit_round({make_address("203.0.113.2"), make_address("203.0.113.3")});
  CHECK(is_refused_at_accept(guard, make_address("203.0.113.1")));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.2")));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.3")));

  links.open_round();  // a round another node hosts: nobody new
  links.admit_round({});
  CHECK(is_refused_at_accept(guard, make_address("203.0.113.2")));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("::1")));
}

TEST_CASE("a link store with a secret makes every connection authenticate", "[etcd][link_guard]") {
  const auto secret = std::make_shared<const ddp::rdzv::auth::Credentials>(
      ddp::rdzv::auth::Credentials{"the-job-secret-0123456789", "run-31"});
  LinkStoreGuard links(secret, true);
  const auto guard = links.guard();
  CHECK(guard.credentials == secret);
  CHECK_FALSE(guard.members);  // no address skips the handshake
  CHECK_FALSE(links.needs_members());
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.9")));  // asked to authenticate
  ddp::rdzv::ServerAdmission admission(guard, make_address("127.0.0.1"));
  CHECK(admission.needs_handshake());  // loopback too
  links.open_round();
  links.admit_round({});
}

TEST_CASE("worker_store_allow=any opens the link store", "[etcd][link_guard]") {
  LinkStoreGuard links(nullptr, false);
  const auto guard = links.guard();
  CHECK_FALSE(guard.credentials);
  CHECK_FALSE(guard.members);
  CHECK_FALSE(is_refused_at_accept(guard, make_address("203.0.113.9")));
}
