// A munge check runs off the store's loop: against a munged that hangs (a UNIX socket that takes
// connections and never answers), one agent's munge handshake waits on its check while another
// client is served; once the munged goes, the waiting agent is refused. No root, no real munged.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "common/unique_fd.hpp"
#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/member_list.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;
using namespace std::chrono_literals;

namespace {

// A munged that never answers: it listens and accepts nobody, so a libmunge client connects (the
// backlog takes it), sends its request and waits.
class HungMunged {
 public:
  HungMunged() {
    char dir[] = "/tmp/ddp_hung_munged_XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/munge.socket";
    fd_ = ddp::UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    REQUIRE(fd_.get() >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof(address.sun_path) - 1);
    REQUIRE(::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_.get(), 16) == 0);
  }
  ~HungMunged() {
    go();
    ::rmdir(dir_.c_str());
  }
  const std::string& socket() const { return path_; }
  // True once a client connected (and waits in the backlog) within `ms`.
  bool is_asked_within(int ms) const {
    pollfd fd{fd_.get(), POLLIN, 0};
    return ::poll(&fd, 1, ms) == 1;
  }
  // munged goes away: waiting clients see their connection reset, new ones are refused.
  void go() {
    fd_ = ddp::UniqueFd();
    ::unlink(path_.c_str());
  }

 private:
  std::string dir_;
  std::string path_;
  ddp::UniqueFd fd_;
};

// HELLO without addresses, then a munge credential of `text` (whatever it holds: munged decides).
ByteVec hello_and_munge_credential(const std::string& text) {
  ByteVec out = auth::hello_bytes({});
  out.push_back(static_cast<std::uint8_t>(text.size() >> 8));
  out.push_back(static_cast<std::uint8_t>(text.size() & 0xFF));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

}  // namespace

TEST_CASE("a munge check that hangs does not delay another client's request",
          "[auth][store][munge_off_loop]") {
  HungMunged munged;
  const auto job = std::make_shared<const auth::Credentials>(
      auth::Credentials{{}, "run-31", munged.socket()});
  // Loopback is a member: a plain client is served without authenticating.
  ServerThread server("127.0.0.1", {}, StoreGuard{job, auth::MemberList::create(), nullptr});
  RawClient agent(server.port());
  agent.send(hello_and_munge_credential("MUNGE:a-credential-munged-will-never-read:"));
  const ByteVec challenge = agent.recv(1 + auth::kChallengeBytes);
  CHECK(challenge[0] == static_cast<std::uint8_t>(auth::Verdict::kMungeChallenge));
  REQUIRE(munged.is_asked_within(5000));  // the store's check waits on munged now

  ConnectOptions options;
  options.connect_timeout = 2s;
  options.call_timeout = 2s;
  auto other = BlockingStore::connect("127.0.0.1", server.port(), options);
  other->set("/k", to_bytes("v"));
  CHECK(to_string(other->get("/k")) == "v");
  CHECK(agent.is_silent_for(0));  // served while the agent's check still waits

  munged.go();
  std::uint8_t verdict = 0;
  boost::system::error_code ec;
  const std::size_t n = agent.socket().read_some(asio::buffer(&verdict, 1), ec);
  CHECK((n == 0 || verdict == static_cast<std::uint8_t>(auth::Verdict::kRefused)));
  CHECK(agent.is_closed_by_server());
}
