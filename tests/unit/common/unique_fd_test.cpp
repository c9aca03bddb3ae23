// UniqueFd: closes what it owns on destruction and reset, hands it on when moved or released.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "common/unique_fd.hpp"

namespace ddp {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST_CASE("UniqueFd closes, moves and releases its descriptor", "[unique_fd]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  UniqueFd read_end(fds[0]);
  {
    UniqueFd write_end(fds[1]);
    CHECK(static_cast<bool>(write_end));
    UniqueFd moved(std::move(write_end));
    CHECK_FALSE(write_end);
    CHECK(write_end.get() == -1);
    CHECK(moved.get() == fds[1]);
    CHECK(is_open(fds[1]));
  }
  CHECK_FALSE(is_open(fds[1]));  // closed when `moved` went away

  const int kept = read_end.release();
  CHECK_FALSE(read_end);
  CHECK(is_open(kept));  // released, not closed
  UniqueFd again;
  again.reset(kept);
  again = UniqueFd();  // move-assigning an empty one closes what was held
  CHECK_FALSE(is_open(kept));
}

}  // namespace
}  // namespace ddp
