// Classifies the exceptions a GlooProcessGroup's transports throw. Gloo throws
// gloo::EnforceNotMet for a broken invariant, gloo::InvalidOperationException for misuse and
// gloo::IoException (or, from GLOO_THROW, plain gloo::Exception) for a failed transfer.
#include "collectives/gloo/gloo_failure.hpp"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include "ddp/error.hpp"

namespace ddp::coll {

bool is_gloo_timeout(const std::exception& e) {
  if (dynamic_cast<const gloo::EnforceNotMet*>(&e) != nullptr ||
      dynamic_cast<const gloo::InvalidOperationException*>(&e) != nullptr) {
    return false;  // a bug or a misuse, never a deadline
  }
  // A timeout has no exception type of its own: Gloo's TCP transport throws the IoException of
  // any failed transfer with a "Timed out waiting ..." message, and shm::PeerFlags a
  // std::runtime_error "timed out waiting for rank N". The message is all there is to read.
  const std::string what = e.what();
  return what.find("Timed out") != std::string::npos || what.find("timed out") != std::string::npos;
}

void throw_gloo_failure(const std::exception& e, const std::string& message) {
  if (is_gloo_timeout(e)) throw TimeoutError(message);
  throw IoError(message);
}

}  // namespace ddp::coll
