#pragma once
// What a GlooProcessGroup shares with its sub-groups (new_group): the TCP device and the options.

#include <memory>

#include "collectives/gloo/gloo_process_group.hpp"

namespace gloo::transport {
class Device;
}

namespace ddp::coll {

struct GlooProcessGroup::Shared {
  std::shared_ptr<gloo::transport::Device> device;
  GlooOptions options;
};

}  // namespace ddp::coll
