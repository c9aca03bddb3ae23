#pragma once
// A random RFC 4122 version-4 UUID in its 36-character text form: the run id torchrun gives a
// single-node or static job that names none.

#include <string>

namespace ddp::agent {

// Lower-case hex, dashes at 8-4-4-4-12; version nibble 4, variant bits 10.
std::string make_uuid4();

}  // namespace ddp::agent
