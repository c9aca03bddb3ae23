// is_gloo_timeout / throw_gloo_failure: which transport exceptions become TimeoutError.
#include <catch2/catch.hpp>

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <stdexcept>

#include "collectives/gloo/gloo_failure.hpp"
#include "ddp/error.hpp"

using namespace ddp;
using namespace ddp::coll;

TEST_CASE("Gloo's and shared memory's timeouts are timeouts", "[gloo]") {
  CHECK(is_gloo_timeout(gloo::IoException(
      "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 300ms for recv operation")));
  CHECK(is_gloo_timeout(TimeoutError("timed out waiting for rank 2")));  // shm::PeerFlags
  // Only Gloo's own exceptions are read by their message; ours say what they are by type.
  CHECK_FALSE(is_gloo_timeout(std::runtime_error("timed out waiting for rank 2")));
  CHECK_THROWS_AS(throw_gloo_failure(gloo::IoException("Timed out waiting 1ms"), "gloo recv"),
                  TimeoutError);
}

TEST_CASE("other Gloo failures are I/O errors", "[gloo]") {
  CHECK_FALSE(is_gloo_timeout(gloo::IoException("Connection closed by peer [10.0.0.2]:4242")));
  CHECK_FALSE(is_gloo_timeout(std::runtime_error("rank 2 (pid 77) exited")));
  // A broken invariant or a misuse is never a deadline, whatever its text quotes.
  CHECK_FALSE(is_gloo_timeout(gloo::EnforceNotMet("f.cc", 1, "timed out", "timed out")));
  CHECK_FALSE(is_gloo_timeout(gloo::InvalidOperationException("Timed out buffer reused")));
  CHECK_THROWS_AS(throw_gloo_failure(gloo::IoException("Connection reset"), "gloo send"), IoError);
  CHECK_THROWS_WITH(
      throw_gloo_failure(gloo::IoException("Connection reset"), "gloo send to rank 1"),
      "gloo send to rank 1");
}
