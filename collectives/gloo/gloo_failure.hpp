#pragma once
// Turns an exception from a GlooProcessGroup's transports (Gloo, or our shared memory) into our
// error vocabulary: TimeoutError or IoError.

#include <exception>
#include <string>

namespace ddp::coll {

// Whether `e`, thrown by a Gloo operation or by shm::ShmCollectives, reports that the operation
// ran out of time (rather than that a peer or link failed).
bool is_gloo_timeout(const std::exception& e);

// Throws TimeoutError(message) when is_gloo_timeout(e), else IoError(message).
[[noreturn]] void throw_gloo_failure(const std::exception& e, const std::string& message);

}  // namespace ddp::coll
