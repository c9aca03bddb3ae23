// Munge credentials against a real munged started by the test (its own key and socket): an
// agent's credential over the challenge and run id authenticates, another user's is refused
// (with or without its uid restriction), a replay is refused by munged, a credential over
// another challenge or run id and a tampered one are refused; a munge-guarded store serves
// agents with munge credentials and tells one with a token file what is wrong; job_credentials
// picks munge under SLURM only while munged answers.

#include <munge.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>

#include "ddp/error.hpp"
#include "rendezvous/auth/job_credentials.hpp"
#include "rendezvous/auth/munge_credential.hpp"
#include "rendezvous/auth/server_handshake.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
#include "tests/unit/rendezvous/auth/munge_daemon.hpp"
#include "tests/unit/rendezvous/store_server/raw_client.hpp"
#include "tests/unit/rendezvous/auth/handshake_bytes.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;
using namespace std::chrono_literals;
using Bytes = std::vector<std::uint8_t>;
using Status = auth::ServerHandshake::Status;

using ddp::rdzv::auth::test::challenge_of;

namespace {

constexpr uid_t kNobody = 65534;

std::shared_ptr<const auth::Credentials> munge_job(const MungeDaemon& daemon,
                                                   const std::string& run_id = "run-31") {
  return std::make_shared<const auth::Credentials>(auth::Credentials{{}, run_id, daemon.socket()});
}


// HELLO (no addresses), then the credential as the client sends it.
Bytes answer(const std::string& credential) {
  Bytes out = auth::hello_bytes({});
  const std::size_t at = out.size();
  out.resize(at + 2 + credential.size());
  out[at] = static_cast<std::uint8_t>(credential.size() >> 8);
  out[at + 1] = static_cast<std::uint8_t>(credential.size() & 0xFF);
  std::copy(credential.begin(), credential.end(), out.begin() + static_cast<std::ptrdiff_t>(at + 2));
  return out;
}

struct Fed {
  Status status;
  Bytes out;
  std::string error;
};

Fed feed(const std::shared_ptr<const auth::Credentials>& job, const Bytes& challenge,
         const std::string& credential) {
  auth::ServerHandshake handshake(job, challenge);
  Fed fed{Status::kNeedMore, {}, {}};
  fed.status = handshake.feed(answer(credential), fed.out).status;
  if (fed.status == Status::kCheckMunge) {
    const auto& query = handshake.munge_query();
    fed.status = handshake.finish_munge(auth::munge_check_for(*job)(query.credential,
                                                                    query.payload),
                                        fed.out)
                     .status;
  }
  fed.error = handshake.error();
  return fed;
}

// A credential over `payload` made by user `uid` (a child process that drops to it), restricted
// to that user's decoders or not.
std::string credential_of(uid_t uid, const std::string& socket, const std::string& payload,
                          bool restricted) {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipe_fds[0]);
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(2);
    munge_ctx_t ctx = munge_ctx_create();
    munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
    if (restricted) munge_ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, uid);
    char* credential = nullptr;
    if (munge_encode(&credential, ctx, payload.data(), static_cast<int>(payload.size())) !=
        EMUNGE_SUCCESS) {
      ::_exit(3);
    }
    const std::string text(credential);
    if (::write(pipe_fds[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return text;
}

struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("a munge credential over the challenge and run id authenticates", "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const auto job = munge_job(daemon);
  const Bytes challenge = challenge_of(5);
  const std::string credential =
      auth::munge_encode(daemon.socket(), auth::munge_payload("run-31", challenge));
  const Fed fed = feed(job, challenge, credential);
  CHECK(fed.status == Status::kAuthenticated);
  CHECK(fed.error.empty());
  REQUIRE(fed.out.size() == 1 + auth::kChallengeBytes + 1);
  CHECK(fed.out.front() == static_cast<std::uint8_t>(auth::Verdict::kMungeChallenge));
  CHECK(Bytes(fed.out.begin() + 1, fed.out.end() - 1) == challenge);
  CHECK(fed.out.back() == static_cast<std::uint8_t>(auth::Verdict::kAccepted));
}

TEST_CASE("a munge credential of another user is refused", "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const Bytes challenge = challenge_of(6);
  const std::string payload = auth::munge_payload("run-31", challenge);
  SECTION("decodable by anyone: the job's user is checked") {
    const Fed fed = feed(munge_job(daemon), challenge,
                         credential_of(kNobody, daemon.socket(), payload, false));
    CHECK(fed.status == Status::kRefused);
    CHECK(fed.out.back() == static_cast<std::uint8_t>(auth::Verdict::kRefused));
    CHECK_THAT(fed.error, Catch::Contains("uid 65534, not of the job's user"));
  }
  SECTION("restricted to its own user: munged refuses to decode it") {
    const Fed fed = feed(munge_job(daemon), challenge,
                         credential_of(kNobody, daemon.socket(), payload, true));
    CHECK(fed.status == Status::kRefused);
    CHECK_THAT(fed.error, Catch::Contains("refused") && Catch::Contains("Unauthorized"));
  }
}

TEST_CASE("a replayed munge credential is refused", "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const auto job = munge_job(daemon);
  const Bytes challenge = challenge_of(7);
  const std::string credential =
      auth::munge_encode(daemon.socket(), auth::munge_payload("run-31", challenge));
  CHECK(feed(job, challenge, credential).status == Status::kAuthenticated);
  // The same bytes again, even against the very challenge they answer (a server that reused
  // one): munged remembers every credential it decoded until it expires.
  const Fed replay = feed(job, challenge, credential);
  CHECK(replay.status == Status::kRefused);
  CHECK_THAT(replay.error, Catch::Contains("Replayed"));
}

TEST_CASE("a munge credential over another payload, or tampered with, is refused",
          "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const auto job = munge_job(daemon);
  const Bytes challenge = challenge_of(8);
  std::string credential;
  std::string why;
  SECTION("another challenge (one captured from an earlier connection)") {
    credential = auth::munge_encode(daemon.socket(), auth::munge_payload("run-31", challenge_of(9)));
    why = "another payload";
  }
  SECTION("another run id") {
    credential = auth::munge_encode(daemon.socket(), auth::munge_payload("run-32", challenge));
    why = "another payload";
  }
  SECTION("the HMAC tag's context instead of munge's") {
    std::string payload = auth::munge_payload("run-31", challenge);
    payload.replace(0, auth::kMungeContext.size(), auth::kTagContext);
    credential = auth::munge_encode(daemon.socket(), payload);
    why = "another payload";
  }
  SECTION("a credential whose bytes were changed on the wire") {
    credential = auth::munge_encode(daemon.socket(), auth::munge_payload("run-31", challenge));
    const std::size_t middle = credential.size() / 2;
    credential[middle] = credential[middle] == 'A' ? 'B' : 'A';
    why = "refused";
  }
  const Fed fed = feed(job, challenge, credential);
  CHECK(fed.status == Status::kRefused);
  CHECK_THAT(fed.error, Catch::Contains(why));
}

TEST_CASE("a munge-guarded store serves agents with munge credentials only", "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const auto job = munge_job(daemon);
  ServerThread server("127.0.0.1", {}, StoreGuard{job, nullptr, nullptr});
  ConnectOptions options;
  options.connect_timeout = 2s;
  options.call_timeout = 2s;
  options.credentials = job;
  auto agent = BlockingStore::connect("127.0.0.1", server.port(), options);
  agent->set("/k", to_bytes("v"));
  CHECK(to_string(agent->get("/k")) == "v");
  SECTION("an agent with a token file is told the job authenticates with munge") {
    options.credentials = std::make_shared<const auth::Credentials>(
        auth::Credentials{"the-job-secret-0123456789", "run-31"});
    CHECK_THROWS_AS(BlockingStore::connect("127.0.0.1", server.port(), options),
                    ddp::ConfigError);
    CHECK_THROWS_WITH(BlockingStore::connect("127.0.0.1", server.port(), options),
                      Catch::Contains("asks for munge credentials") &&
                          Catch::Contains("a token file"));
  }
  SECTION("another run id is refused") {
    options.credentials = munge_job(daemon, "run-32");
    CHECK_THROWS_AS(BlockingStore::connect("127.0.0.1", server.port(), options),
                    ddp::ConfigError);
  }
  SECTION("a TCPStore request without a credential is never answered") {
    RawClient stranger(server.port());
    stranger.send(cat({byte(2), str("/k")}));  // 1.13 GET
    CHECK(stranger.is_closed_by_server());
  }
}

TEST_CASE("under SLURM without a token file an agent uses munge while munged answers",
          "[auth][munge]") {
  MungeDaemon daemon;
  if (!require_munge(daemon)) return;
  const ScopedEnv no_token("DDPRUN_TOKEN_FILE", nullptr);
  const ScopedEnv socket("DDPRUN_MUNGE_SOCKET", daemon.socket().c_str());
  SECTION("SLURM job, munged answering: munge") {
    const ScopedEnv slurm("SLURM_JOB_ID", "4242");
    const auto credentials = auth::job_credentials(std::nullopt, "run-31");
    REQUIRE(credentials);
    CHECK(credentials->uses_munge());
    CHECK(*credentials->munge_socket == daemon.socket());
    CHECK(credentials->run_id == "run-31");
  }
  SECTION("SLURM job, no munged on the socket: none (the stores are open, as before)") {
    const ScopedEnv slurm("SLURM_JOB_ID", "4242");
    const ScopedEnv nowhere("DDPRUN_MUNGE_SOCKET", "/nonexistent/munge.socket");
    CHECK_FALSE(auth::job_credentials(std::nullopt, "run-31"));
  }
  SECTION("not under SLURM: none") {
    const ScopedEnv slurm("SLURM_JOB_ID", nullptr);
    CHECK_FALSE(auth::job_credentials(std::nullopt, "run-31"));
  }
}
