// StoreConnection: connect/backoff, handshake and deadline-bounded I/O for TcpStoreClient.
//
// Deadlines: one steady_timer per socket cancels the socket when a call runs past its deadline
// (the asio timeouts example), rather than an awaitable `||` per read: no extra coroutine frames,
// which matters to the store benchmark. The timer is not re-armed per call: a call records its
// deadline, and the timer's wait, when it fires, cancels the socket only if a call is in progress
// and past its deadline, or waits again for that call's deadline (calls end long before their
// deadlines, and a timer re-armed and cancelled per call was a few per cent of a simulated
// member's CPU). A call with an earlier deadline than the pending wait re-arms it. The handler
// holds the Socket by shared_ptr and a generation number, so a handler that fires late, after
// the client went away, touches nothing that is gone and cancels nothing that is new.
#include "rendezvous/store_client/store_connection.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <random>
#include <span>
#include <tuple>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/auth/blocking_call.hpp"
#include "rendezvous/auth/munge_credential.hpp"
#include "rendezvous/net_address.hpp"

namespace ddp::rdzv::detail {
namespace {

using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kReadBufferBytes = 64 * 1024;

std::minstd_rand& rng() {
  thread_local std::minstd_rand engine{std::random_device{}()};
  return engine;
}

}  // namespace

// "Equal jitter": half the backoff is fixed, the other half random, so that many clients started
// together (every worker of a job) spread out without any of them retrying too eagerly.
std::chrono::milliseconds jittered(std::chrono::milliseconds backoff) {
  const auto half = std::max<std::int64_t>(backoff.count() / 2, 1);
  const auto spread = std::max<std::int64_t>(backoff.count() - half, 0);
  std::uniform_int_distribution<std::int64_t> extra(0, spread);
  return std::chrono::milliseconds(half + extra(rng()));
}

std::string format_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

struct StoreConnection::Socket {
  explicit Socket(const asio::any_io_executor& executor)
      : socket(executor), resolver(executor), timer(executor) {}
  tcp::socket socket;
  tcp::resolver resolver;
  asio::steady_timer timer;
  Clock::time_point deadline = Clock::time_point::max();  // of the call in progress
  bool active = false;           // a call is in progress
  bool waiting = false;          // the timer has a wait pending
  std::uint64_t generation = 0;  // bumped by every new wait and by stop(); stale handlers return
  bool expired = false;

  // The call ended: its deadline no longer counts (the timer's wait stays).
  void disarm() { active = false; }
  // The socket closes: no wait stays pending.
  void stop() {
    active = false;
    waiting = false;
    ++generation;
    timer.cancel();
  }
  // Waits until `deadline`, then expires the call in progress if it is past its own.
  static void wait(const std::shared_ptr<Socket>& s) {
    s->waiting = true;
    const auto generation = ++s->generation;
    s->timer.expires_at(s->deadline);
    s->timer.async_wait([s, generation](const boost::system::error_code& ec) {
      if (ec || s->generation != generation) return;
      s->waiting = false;
      if (!s->active) return;
      if (Clock::now() < s->deadline) {  // a later call's: wait for it
        wait(s);
        return;
      }
      s->expired = true;
      boost::system::error_code ignored;
      s->socket.cancel(ignored);
      s->resolver.cancel();
    });
  }
};

StoreConnection::StoreConnection(asio::any_io_executor executor, std::string host,
                                 std::uint16_t port, ConnectOptions options)
    : executor_(std::move(executor)),
      host_(std::move(host)),
      port_(port),
      address_(fmt::format("{}:{}", host_, port_)),
      options_(options),
      encoder_(options.dialect),
      backoff_(executor_),
      turn_(executor_, asio::steady_timer::time_point::max()),
      read_buf_(std::make_unique_for_overwrite<std::uint8_t[]>(kReadBufferBytes)),
      call_timeout_(options.call_timeout) {}

StoreConnection::~StoreConnection() { close(); }

bool StoreConnection::is_open() const { return socket_ && socket_->socket.is_open(); }

void StoreConnection::close() {
  if (!socket_) return;
  socket_->stop();
  socket_->resolver.cancel();
  boost::system::error_code ignored;
  socket_->socket.close(ignored);
  socket_.reset();
  read_begin_ = read_end_ = 0;
}

// Every coroutine here checks shut_down_ right after each co_await, before it touches socket_
// (gone after close()) or decides anything: an operation that resumes after its client was
// destroyed must fail at once, never reconnect, and never return into TcpStoreClient code that
// would use the destroyed client. The calls waiting for their turn wake to the same end.
void StoreConnection::shut_down() {
  shut_down_ = true;
  backoff_.cancel();
  turn_.cancel();
  close();
}

void StoreConnection::arm(Clock::time_point deadline) {
  const auto& s = socket_;
  s->expired = false;
  s->active = true;
  s->deadline = deadline;
  if (s->waiting && s->timer.expiry() <= deadline) return;  // it fires first and looks again
  Socket::wait(s);
}

bool StoreConnection::deadline_passed() const { return socket_ && socket_->expired; }

asio::awaitable<void> StoreConnection::start_call(std::string what,
                                                  std::chrono::milliseconds timeout) {
  while (busy_ && !shut_down_) {
    co_await turn_.async_wait(kTuple);
  }
  if (shut_down_) throw_shut_down(what);
  busy_ = true;
  try {
    if (!is_open()) co_await open();
  } catch (...) {
    finish_call();
    throw;
  }
  begin_call(std::move(what), timeout);
  request_.clear();
}

void StoreConnection::finish_call() {
  if (socket_) socket_->disarm();
  busy_ = false;
  turn_.cancel_one();
}

void StoreConnection::begin_call(std::string what, std::chrono::milliseconds timeout) {
  what_ = std::move(what);
  call_timeout_ = timeout;
  arm(Clock::now() + timeout);
}

void StoreConnection::throw_timeout() {
  close();
  throw TimeoutError(
      fmt::format("store {} timed out after {} at {}", what_, format_duration(call_timeout_),
                  address_));
}

void StoreConnection::throw_io(const std::string& why) {
  close();
  throw IoError(fmt::format("store {} failed at {}: {}", what_, address_, why));
}

void StoreConnection::throw_shut_down(const std::string& what) const {
  throw IoError(fmt::format("store {} failed at {}: the client was destroyed", what, address_));
}

asio::awaitable<void> StoreConnection::open() {
  close();
  const auto deadline = Clock::now() + options_.connect_timeout;
  auto backoff = std::max(options_.initial_backoff, std::chrono::milliseconds(1));
  std::string last_error;
  for (int attempt = 1;; ++attempt) {
    if (shut_down_) throw_shut_down("connect");
    socket_ = std::make_shared<Socket>(executor_);
    try {
      co_await connect_once(deadline);
      co_await handshake();
      co_return;
    } catch (const TimeoutError& e) {
      last_error = e.what();
    } catch (const boost::system::system_error& e) {
      // An attempt cut short by the overall deadline says less than the one before it.
      if (e.code() != asio::error::timed_out || last_error.empty()) last_error = e.code().message();
    }
    close();
    const auto now = Clock::now();
    if (now >= deadline) {
      throw TimeoutError(fmt::format("store at {} unreachable after {}: {}", address_,
                                     format_duration(options_.connect_timeout), last_error));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const auto delay = std::min(jittered(backoff), left);
    log::get("store")->debug("store connect retry address={} attempt={} error=\"{}\" next_in_ms={}",
                             address_, attempt, last_error, delay.count());
    backoff_.expires_after(delay);
    co_await backoff_.async_wait(kTuple);
    backoff = std::min(backoff * 2, std::max(options_.max_backoff, options_.initial_backoff));
  }
}

// One attempt: resolve and connect before `deadline`. Throws system_error (the connect error, or
// timed_out) so that open() retries; an attempt never waits past the overall deadline. A numeric
// address is connected to directly: Asio's resolver starts a thread of its own on first use,
// which costs a process that only talks to 127.0.0.1 or 10.0.0.1 more than the connection.
asio::awaitable<void> StoreConnection::connect_once(Clock::time_point deadline) {
  arm(deadline);
  const auto fail_if = [this](const boost::system::error_code& ec) {
    if (shut_down_) throw_shut_down("connect");
    if (deadline_passed()) throw boost::system::system_error(asio::error::timed_out);
    if (ec) throw boost::system::system_error(ec);
  };
  boost::system::error_code not_numeric;
  const auto address = asio::ip::make_address(host_, not_numeric);
  boost::system::error_code cec;
  if (!not_numeric) {
    std::tie(cec) =
        co_await socket_->socket.async_connect(tcp::endpoint(address, port_), kTuple);
  } else {
    auto [rec, endpoints] =
        co_await socket_->resolver.async_resolve(host_, std::to_string(port_), kTuple);
    fail_if(rec);
    std::tie(cec, std::ignore) = co_await asio::async_connect(socket_->socket, endpoints, kTuple);
  }
  fail_if(cec);
  socket_->disarm();
  socket_->socket.set_option(tcp::no_delay(true));
}

// 2.x: VALIDATE (no reply) then PING with a nonce that must come back. A server that closes the
// connection here is not retried: it accepted us and then refused the dialect (PyTorch 1.13's
// server resets 2.x connections). With credentials (or asked to report this node's addresses),
// ddprun's HELLO goes first, and VALIDATE and PING ride in the answer's write, so authenticating
// costs one round trip more than not.
asio::awaitable<void> StoreConnection::handshake() {
  const auto credentials = options_.credentials ? options_.credentials : auth::default_credentials();
  const bool torch2 = options_.dialect == WireDialect::kTorch2;
  const bool hello = credentials || options_.report_addresses;
  if (!torch2 && !hello) co_return;
  const auto nonce = static_cast<std::uint32_t>(rng()());
  wire::ByteVec request;
  if (torch2) {
    encoder_.validate(request);
    encoder_.ping(request, nonce);
  }
  bool tag_sent = false;
  if (hello) tag_sent = co_await authenticate(credentials.get(), request);
  begin_call(tag_sent ? "authentication" : "handshake (VALIDATE, PING)", options_.call_timeout);
  try {
    if (!tag_sent) co_await send(request);
    if (tag_sent) co_await read_verdict();
    if (torch2) co_await receive(wire::ReplyShape::kU32);
  } catch (const IoError& e) {
    if (shut_down_ || tag_sent) throw;
    throw IoError(fmt::format(
        "{} (the server closed a 2.x connection: a PyTorch 1.13 server speaks only the 1.13 "
        "dialect)",
        e.what()));
  }
  socket_->disarm();
  if (torch2 && decoder_.u32() != nonce) {
    throw_io(fmt::format("PING answered {:#x}, expected {:#x}", decoder_.u32(), nonce));
  }
}

namespace {

// Why the server's challenge cannot be answered, when it asks for the other kind of credentials
// than this agent holds: the agents of one job disagree on how the job authenticates, which only
// the user can fix.
std::string credentials_mismatch(bool munge, const auth::Credentials* credentials,
                                 const std::string& address) {
  return fmt::format(
      "store at {} asks for {}, but this agent has {}: give every agent of the job the same "
      "--rdzv_conf token_file (or DDPRUN_TOKEN_FILE), or none under SLURM with munge "
      "(docs/security.md)",
      address, munge ? "munge credentials" : "the job secret",
      credentials == nullptr      ? "no credentials"
      : credentials->uses_munge() ? "munge credentials (no token file)"
                                  : "a token file");
}

// The answer to the server's challenge: the tag for a secret, or a munge credential (u16
// length, then the text) over the challenge and the run id. munged is asked off the loop (it
// may be slow): the agent's other connections go on meanwhile.
asio::awaitable<wire::ByteVec> answer_for(bool munge, const auth::Credentials& credentials,
                                          std::span<const std::uint8_t> challenge) {
  if (!munge) {
    const auth::Tag tag = auth::auth_tag(credentials, challenge);
    co_return wire::ByteVec(tag.begin(), tag.end());
  }
  // (Built before the co_await: GCC 12 destroys a lambda temporary in a co_await twice.)
  std::function<std::string()> encode = [socket = *credentials.munge_socket,
                                         payload = auth::munge_payload(credentials.run_id,
                                                                       challenge)] {
    return auth::munge_encode(socket, payload);
  };
  const std::string credential = co_await auth::off_loop(std::move(encode));
  if (credential.size() > auth::kMaxMungeCredentialBytes) {
    throw IoError(fmt::format("munge made a credential of {} bytes; at most {} are sent",
                              credential.size(), auth::kMaxMungeCredentialBytes));
  }
  wire::ByteVec out(2 + credential.size());
  out[0] = static_cast<std::uint8_t>(credential.size() >> 8);
  out[1] = static_cast<std::uint8_t>(credential.size() & 0xFF);
  std::copy(credential.begin(), credential.end(), out.begin() + 2);
  co_return out;
}

}  // namespace

// The handshake's one-byte verdicts and raw challenge are read as u8 replies, through the same
// buffer as the TCPStore replies that follow them.
asio::awaitable<bool> StoreConnection::authenticate(const auth::Credentials* credentials,
                                                    const wire::ByteVec& after) {
  begin_call("authentication", options_.call_timeout);
  try {
    co_await send(auth::hello_bytes(local_addresses()));
    co_await receive(wire::ReplyShape::kU8);
  } catch (const IoError& e) {
    if (shut_down_) throw;
    throw IoError(fmt::format("{} (the server does not speak ddprun's handshake: a PyTorch store, "
                              "or not a store of this job)",
                              e.what()));
  }
  const auto verdict = auth::Verdict{decoder_.u8()};
  if (verdict == auth::Verdict::kNotRequired) {
    // No mutual authentication either way (docs/security.md): such a server learns nothing.
    log::get("store")->debug("store at {} holds no job secret; connecting unauthenticated",
                             address_);
    socket_->disarm();
    co_return false;
  }
  if (verdict != auth::Verdict::kChallenge && verdict != auth::Verdict::kMungeChallenge) {
    throw_io(fmt::format("the server answered ddprun's HELLO with {:#x}", decoder_.u8()));
  }
  std::array<std::uint8_t, auth::kChallengeBytes> challenge{};
  for (auto& byte : challenge) {
    co_await receive(wire::ReplyShape::kU8);
    byte = decoder_.u8();
  }
  const bool munge = verdict == auth::Verdict::kMungeChallenge;
  if (credentials == nullptr || credentials->uses_munge() != munge) {
    close();
    throw ConfigError(credentials_mismatch(munge, credentials, address_));
  }
  wire::ByteVec out = co_await answer_for(munge, *credentials, challenge);
  out.insert(out.end(), after.begin(), after.end());
  co_await send(out);
  socket_->disarm();
  co_return true;
}

asio::awaitable<void> StoreConnection::read_verdict() {
  try {
    co_await receive(wire::ReplyShape::kU8);
  } catch (const IoError&) {
    if (shut_down_) throw;
    throw_io("the server closed the connection after the authentication tag: it refused this "
             "agent's job secret (a different token file or --rdzv_id)");
  }
  const auto verdict = auth::Verdict{decoder_.u8()};
  if (verdict == auth::Verdict::kAccepted) co_return;
  if (verdict == auth::Verdict::kRefused) {
    // Definite, and the user's to fix: retrying or re-rendezvousing would not help.
    close();
    throw ConfigError(fmt::format(
        "store at {} refused this agent's job secret: its --rdzv_conf token_file (or "
        "DDPRUN_TOKEN_FILE) or --rdzv_id differs from the job's (under munge: another user, or "
        "another --rdzv_id; the store's log says which)",
        address_));
  }
  throw_io(fmt::format("the server answered the authentication tag with {:#x}", decoder_.u8()));
}

asio::awaitable<void> StoreConnection::send(const wire::ByteVec& bytes) {
  if (deadline_passed()) throw_timeout();
  auto [ec, n] = co_await asio::async_write(socket_->socket, asio::buffer(bytes), kTuple);
  if (shut_down_) throw_shut_down(what_);
  if (deadline_passed()) throw_timeout();
  if (ec) throw_io(ec.message());
}

asio::awaitable<void> StoreConnection::receive(wire::ReplyShape shape, std::size_t count) {
  const bool in_time = co_await receive_or_deadline(shape, count);
  if (!in_time) throw_timeout();
}

asio::awaitable<void> StoreConnection::exchange(wire::ReplyShape shape, std::size_t count) {
  co_await send(request_);
  const bool in_time = co_await receive_or_deadline(shape, count);
  if (!in_time) throw_timeout();
}

asio::awaitable<bool> StoreConnection::receive_or_deadline(wire::ReplyShape shape,
                                                           std::size_t count) {
  decoder_.expect(shape, count);
  for (;;) {
    std::size_t used = 0;
    const auto status = decoder_.consume(
        wire::ByteSpan(read_buf_.get() + read_begin_, read_end_ - read_begin_), used);
    read_begin_ += used;
    if (status == wire::DecodeStatus::kOk) co_return true;
    if (status == wire::DecodeStatus::kBad) throw_io("bad reply: " + decoder_.error());
    read_begin_ = read_end_ = 0;  // kNeedMore consumed everything buffered
    if (deadline_passed()) co_return false;
    auto [ec, n] = co_await socket_->socket.async_read_some(
        asio::buffer(read_buf_.get(), kReadBufferBytes), kTuple);
    if (shut_down_) throw_shut_down(what_);
    read_end_ = n;  // keep bytes that raced the deadline: they belong to this reply
    if (n == 0 && deadline_passed()) co_return false;
    if (ec == asio::error::eof) throw_io("connection closed by the server");
    if (ec && n == 0) throw_io(ec.message());
  }
}

}  // namespace ddp::rdzv::detail
