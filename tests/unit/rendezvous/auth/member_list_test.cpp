// MemberList and ServerAdmission without sockets: who a workers' store admits (loopback, the
// host's own addresses, agents while connected), who is refused at accept, and which
// connections must authenticate; IPv6 members, link-local ones with their interface.

#include <net/if.h>

#include <catch2/catch.hpp>

#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/store_server/server_admission.hpp"

using namespace ddp::rdzv;
using auth::MemberList;
using boost::asio::ip::make_address;
using Bytes = std::vector<std::uint8_t>;

TEST_CASE("the member list admits loopback, fixed addresses and held ones while held",
          "[auth][members]") {
  auto list = MemberList::create();
  CHECK(list->admits(make_address("127.0.0.1")));
  CHECK(list->admits(make_address("::1")));
  CHECK_FALSE(list->admits(make_address("10.0.0.2")));
  list->add_fixed(make_address("10.0.0.1"));
  CHECK(list->admits(make_address("10.0.0.1")));
  CHECK(list->admits(make_address("::ffff:10.0.0.1")));  // an IPv4 peer of a "::" listener
  {
    auto first = list->hold(make_address("::ffff:10.0.0.2"));
    auto second = list->hold(make_address("10.0.0.2"));  // one node, two connections
    CHECK(list->admits(make_address("10.0.0.2")));
    first.reset();
    CHECK(list->admits(make_address("10.0.0.2")));
  }
  CHECK_FALSE(list->admits(make_address("10.0.0.2")));
  CHECK(list->addresses() == std::vector<std::string>{"10.0.0.1"});
}

TEST_CASE("a hold outliving its list releases nothing", "[auth][members]") {
  auto list = MemberList::create();
  auto hold = list->hold(make_address("10.0.0.3"));
  list.reset();
  hold.reset();  // must not touch the destroyed list
  SUCCEED();
}

TEST_CASE("a members-only store without a secret refuses strangers at accept",
          "[auth][members]") {
  auto members = MemberList::create();
  const StoreGuard guard{nullptr, members, nullptr};
  CHECK(is_refused_at_accept(guard, make_address("10.0.0.9")));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("127.0.0.1")));
  auto agent = members->hold(make_address("10.0.0.9"));
  CHECK_FALSE(is_refused_at_accept(guard, make_address("10.0.0.9")));
  CHECK_FALSE(is_refused_at_accept(StoreGuard{}, make_address("10.0.0.9")));  // open store
}

TEST_CASE("with a secret, strangers must authenticate and members may speak TCPStore",
          "[auth][members]") {
  const auto job = std::make_shared<const auth::Credentials>(
      auth::Credentials{"a-secret-of-16+bytes", "run1"});
  auto members = MemberList::create();
  members->add_fixed(make_address("10.0.0.1"));
  const Bytes set_request = {0x00, 0x01, 0, 0, 0, 0, 0, 0, 0};  // a 1.13 SET's first bytes
  SECTION("a worker on a member node") {
    ServerAdmission admission(StoreGuard{job, members, nullptr}, make_address("10.0.0.1"));
    CHECK_FALSE(admission.needs_handshake());
    Bytes out;
    CHECK(admission.feed(set_request, out).outcome == ServerAdmission::Outcome::kOpen);
  }
  SECTION("a stranger speaking PyTorch's protocol") {
    ServerAdmission admission(StoreGuard{job, members, nullptr}, make_address("10.0.0.66"));
    CHECK(admission.needs_handshake());
    CHECK_FALSE(is_refused_at_accept(StoreGuard{job, members, nullptr},
                                     make_address("10.0.0.66")));  // it may still authenticate
    Bytes out;
    CHECK(admission.feed(set_request, out).outcome == ServerAdmission::Outcome::kRefused);
    CHECK(out.empty());  // a stranger's request is never answered
    CHECK_THAT(admission.refusal(), Catch::Contains("not one of the job's nodes"));
  }
  SECTION("an agent on a new node authenticates and becomes a member, with every address") {
    auto learned = MemberList::create();
    auto admission = std::make_unique<ServerAdmission>(StoreGuard{job, nullptr, learned},
                                                       make_address("10.0.0.7"));
    Bytes out;
    const Bytes hello = auth::hello_bytes({make_address("10.0.0.7"), make_address("10.9.0.7")});
    CHECK(admission->feed(hello, out).outcome == ServerAdmission::Outcome::kNeedMore);
    REQUIRE(out.size() == 1 + auth::kChallengeBytes);
    const auth::Tag tag = auth::auth_tag(*job, std::span(out).subspan(1));
    CHECK_FALSE(learned->admits(make_address("10.0.0.7")));
    CHECK_FALSE(learned->admits(make_address("10.9.0.7")));  // not before it authenticated
    CHECK(admission->feed(tag, out).outcome == ServerAdmission::Outcome::kOpen);
    CHECK(learned->admits(make_address("10.0.0.7")));
    CHECK(learned->admits(make_address("10.9.0.7")));  // its node's second interface
    admission.reset();  // the connection closed: the node left
    CHECK_FALSE(learned->admits(make_address("10.9.0.7")));
  }
  SECTION("a stranger's HELLO reports nothing that counts until it authenticates") {
    auto learned = MemberList::create();
    ServerAdmission admission(StoreGuard{job, nullptr, learned}, make_address("10.0.0.66"));
    Bytes out;
    const Bytes hello = auth::hello_bytes({make_address("10.0.0.7")});
    CHECK(admission.feed(hello, out).outcome == ServerAdmission::Outcome::kNeedMore);
    const Bytes wrong(auth::kTagBytes, 0x55);
    CHECK(admission.feed(wrong, out).outcome == ServerAdmission::Outcome::kRefused);
    CHECK_FALSE(learned->admits(make_address("10.0.0.7")));
  }
  SECTION("the rendezvous store refuses every unauthenticated request, even from loopback") {
    ServerAdmission admission(StoreGuard{job, nullptr, nullptr}, make_address("127.0.0.1"));
    Bytes out;
    CHECK(admission.feed(set_request, out).outcome == ServerAdmission::Outcome::kRefused);
  }
}

TEST_CASE("IPv6 members match the peer address of an accepted connection, scopes included",
          "[auth][members][ipv6]") {
  namespace ip = boost::asio::ip;
  // What accept gives for a peer: the address, and for a link-local one the index of the
  // interface it came in on ("lo" exists everywhere; the scope is the point, not the interface).
  const unsigned lo = ::if_nametoindex("lo");
  REQUIRE(lo != 0);
  const auto peer = [](const char* text, unsigned scope) {
    return ip::address(ip::address_v6(ip::make_address_v6(text).to_bytes(), scope));
  };
  auto list = MemberList::create();
  SECTION("a global address, given in any spelling") {
    list->add_fixed(make_address("2001:db8::1"));
    CHECK(list->admits(peer("2001:db8:0:0::1", 0)));
    CHECK(list->admits(peer("2001:db8::1", lo)));  // a scope on a global address is no scope
    CHECK_FALSE(list->admits(peer("2001:db8::2", 0)));
  }
  SECTION("a link-local member with an interface admits it there only") {
    list->add_fixed(make_address("fe80::1%lo"));
    CHECK(list->admits(peer("fe80::1", lo)));
    CHECK_FALSE(list->admits(peer("fe80::1", lo + 1000)));  // the same address on another link
    CHECK_FALSE(list->admits(peer("fe80::2", lo)));
  }
  SECTION("a link-local member with a numeric scope is the same member") {
    list->add_fixed(make_address("fe80::1%" + std::to_string(lo)));
    CHECK(list->admits(peer("fe80::1", lo)));
  }
  SECTION("a link-local member without a scope admits it on every interface") {
    list->add_fixed(make_address("fe80::1"));
    CHECK(list->admits(peer("fe80::1", lo)));
    CHECK(list->admits(peer("fe80::1", lo + 1000)));
  }
  SECTION("an agent's connection over link-local makes its address a member on that link") {
    auto hold = list->hold(peer("fe80::7", lo));
    CHECK(list->admits(peer("fe80::7", lo)));
    CHECK_FALSE(list->admits(peer("fe80::7", lo + 1000)));
    hold.reset();
    CHECK_FALSE(list->admits(peer("fe80::7", lo)));
  }
  SECTION("an IPv4 peer of a dual-stack listener is its IPv4 member") {
    list->add_fixed(make_address("10.0.0.5"));
    CHECK(list->admits(make_address("::ffff:10.0.0.5")));
  }
}
