// ReformClient over a Unix stream socket. The reader thread waits in poll() on the socket and a
// stop pipe, with a timeout that ends when the newest place becomes overdue; the training thread
// only takes the mutex. Lines are those of common/reform_protocol.hpp.

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "common/reform_protocol.hpp"
#include "common/unique_fd.hpp"
#include "ddp/error.hpp"
#include "ddp/reform_client.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;

UniqueFd connect_unix(const std::string& address) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // "@name" is Linux's abstract namespace: a leading NUL and no file.
  const bool abstract = !address.empty() && address[0] == '@';
  std::string path = address;
  if (abstract) path[0] = '\0';
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    throw IoError(fmt::format("reform channel {}: not a socket address", address));
  }
  std::memcpy(sa.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                          (abstract ? 0 : 1));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), len) != 0) {
    throw IoError(fmt::format("reform channel {}: connect failed: {}", address,
                              std::strerror(errno)));
  }
  return fd;
}

void send_all(int fd, const std::string& line, const std::string& address) {
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw IoError(fmt::format("reform channel {}: send failed: {}", address,
                                std::strerror(errno)));
    }
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

struct ReformClient::Impl {
  std::string address;
  UniqueFd socket;
  UniqueFd stop_read;
  UniqueFd stop_write;
  std::chrono::milliseconds grace;
  OverdueHandler on_overdue;
  PlaceHandler on_place;
  std::thread reader;

  std::mutex mutex;  // guards what follows
  std::condition_variable changed;
  std::optional<reform::Place> latest;
  Clock::time_point due;  // when the training thread must have taken `latest`
  Clock::time_point progress = Clock::now();  // its last commit or place taken
  bool waiting = false;  // it waits for a place (it takes one at once)
  bool forming = true;   // it took a place (or started) and has not committed since
  int taken = -1;       // the newest round the training thread took a place of
  std::string failure;  // why the channel failed; "" while it works
  bool overdue_called = false;

  // Milliseconds until the newest place is overdue (0: it is); -1: nothing waits.
  int overdue_in_ms() const {
    if (!latest || latest->round <= taken || overdue_called || !on_overdue) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - Clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()));
  }

  void fail(std::string why) {
    std::lock_guard lock(mutex);
    if (failure.empty()) failure = std::move(why);
    changed.notify_all();
  }

  void on_line(std::string_view line) {
    const auto place = reform::parse_place_line(line);
    if (!place) return;  // another verb, for a newer worker
    {
      std::lock_guard lock(mutex);
      if (latest && place->round <= latest->round) return;
      latest = *place;
      // A training thread commits at least every `grace` (grace is longer than a step), so one
      // silent for longer is blocked (in a collective with a peer whose link was cut until the
      // peer's loss was judged) and is not waited for again. One forming a group waits for its
      // peers as long as they take: its place is due a grace after the arrival.
      const Clock::time_point now = Clock::now();
      due = std::max(now, (waiting || forming ? now : progress) + grace);
      changed.notify_all();
    }
    if (on_place) on_place(to_public(*place));  // unlocked: it may look at the training's group
  }

  void serve() {
    std::string buffer;
    char chunk[4096];
    for (;;) {
      int timeout;
      {
        std::lock_guard lock(mutex);
        timeout = overdue_in_ms();
      }
      if (timeout == 0) {
        int round;
        {
          std::lock_guard lock(mutex);
          overdue_called = true;
          round = latest->round;
        }
        if (on_overdue(round)) {  // freed some other way: the place waits another grace
          std::lock_guard lock(mutex);
          overdue_called = false;
          due = Clock::now() + grace;
        }
        continue;
      }
      pollfd fds[2] = {{socket.get(), POLLIN, 0}, {stop_read.get(), POLLIN, 0}};
      const int ready = ::poll(fds, 2, timeout);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return fail(fmt::format("poll: {}", std::strerror(errno)));
      if (fds[1].revents != 0) return;
      if (fds[0].revents == 0) continue;
      const ssize_t n = ::recv(socket.get(), chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return fail(n == 0 ? "the agent closed it" : fmt::format("recv: {}", std::strerror(errno)));
      }
      buffer.append(chunk, static_cast<std::size_t>(n));
      for (std::size_t eol; (eol = buffer.find('\n')) != std::string::npos;) {
        on_line(std::string_view(buffer).substr(0, eol));
        buffer.erase(0, eol + 1);
      }
      if (buffer.size() > reform::kMaxPlaceLineBytes) {
        return fail(fmt::format("a line longer than {} bytes", reform::kMaxPlaceLineBytes));
      }
    }
  }

  void check_open() const {
    if (!failure.empty()) {
      throw IoError(fmt::format("reform channel {} failed: {}", address, failure));
    }
  }

  static ReformPlace to_public(const reform::Place& p) { return ReformPlace{p.round, p.env}; }
};

ReformClient::ReformClient(const std::string& address, int local_rank,
                           std::chrono::milliseconds grace, OverdueHandler on_overdue,
                           PlaceHandler on_place)
    : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.address = address;
  c.grace = grace;
  c.on_overdue = std::move(on_overdue);
  c.on_place = std::move(on_place);
  c.socket = connect_unix(address);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("reform channel {}: pipe: {}", address, std::strerror(errno)));
  }
  c.stop_read.reset(pipe_fds[0]);
  c.stop_write.reset(pipe_fds[1]);
  send_all(c.socket.get(), reform::encode_hello(local_rank, static_cast<long>(::getpid())),
           address);
  c.reader = std::thread([&c] { c.serve(); });
}

ReformClient::~ReformClient() {
  const char stop = 's';
  [[maybe_unused]] const ssize_t n = ::write(impl_->stop_write.get(), &stop, 1);
  impl_->reader.join();
}

std::unique_ptr<ReformClient> ReformClient::from_env(std::chrono::milliseconds grace,
                                                     OverdueHandler on_overdue,
                                                     PlaceHandler on_place) {
  const char* address = std::getenv(reform::kSocketEnv);
  if (address == nullptr || *address == '\0') return nullptr;
  const char* rank_text = std::getenv(reform::kLocalRankEnv);
  if (rank_text == nullptr || *rank_text == '\0') rank_text = std::getenv("LOCAL_RANK");
  const std::optional<int> local_rank = parse_number<int>(rank_text ? rank_text : "0");
  if (!local_rank || *local_rank < 0) {
    throw ConfigError(fmt::format("environment variable {}='{}' is not a local rank",
                                  reform::kLocalRankEnv, rank_text ? rank_text : ""));
  }
  return std::make_unique<ReformClient>(address, *local_rank, grace, std::move(on_overdue),
                                        std::move(on_place));
}

std::string ReformClient::state_dir_from_env() {
  const char* dir = std::getenv(reform::kStateDirEnv);
  return dir != nullptr ? dir : "";
}

std::optional<ReformPlace> ReformClient::newer_than(int round) {
  std::lock_guard lock(impl_->mutex);
  impl_->check_open();
  if (impl_->latest && impl_->latest->round > round) return Impl::to_public(*impl_->latest);
  return std::nullopt;
}

ReformPlace ReformClient::wait_newer_than(int round) {
  std::unique_lock lock(impl_->mutex);
  impl_->waiting = true;
  impl_->changed.wait(lock, [&] {
    return !impl_->failure.empty() || (impl_->latest && impl_->latest->round > round);
  });
  impl_->waiting = false;
  impl_->check_open();
  impl_->taken = impl_->latest->round;
  impl_->progress = Clock::now();
  impl_->forming = true;
  return Impl::to_public(*impl_->latest);
}

void ReformClient::progressed() {
  std::lock_guard lock(impl_->mutex);
  impl_->progress = Clock::now();
  impl_->forming = false;
}

void ReformClient::reformed(int round) {
  send_all(impl_->socket.get(), reform::encode_reformed(round), impl_->address);
}

}  // namespace ddp
