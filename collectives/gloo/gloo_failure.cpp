// Classifies the exceptions a GlooProcessGroup's transports throw. Gloo throws
// gloo::EnforceNotMet for a broken invariant, gloo::InvalidOperationException for misuse and
// gloo::IoException (or, from GLOO_THROW, plain gloo::Exception) for a failed transfer.
#include "collectives/gloo/gloo_failure.hpp"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <string_view>

#include "ddp/error.hpp"

namespace ddp::coll {

bool is_gloo_timeout(const std::exception& e) {
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) return true;  // shm::PeerFlags, our own
  if (dynamic_cast<const gloo::EnforceNotMet*>(&e) != nullptr ||
      dynamic_cast<const gloo::InvalidOperationException*>(&e) != nullptr) {
    return false;  // a bug or a misuse, never a deadline
  }
  if (dynamic_cast<const gloo::Exception*>(&e) == nullptr) return false;
  // Gloo has no exception type for a timeout: its TCP transport throws the IoException of any
  // failed transfer (or GLOO_THROW a plain gloo::Exception) with a "Timed out waiting ..."
  // message. For Gloo's own exceptions the message is all there is to read.
  const std::string_view what = e.what();
  return what.find("Timed out") != std::string_view::npos ||
         what.find("timed out") != std::string_view::npos;
}

void throw_gloo_failure(const std::exception& e, const std::string& message) {
  if (is_gloo_timeout(e)) throw TimeoutError(message);
  throw IoError(message);
}

}  // namespace ddp::coll
