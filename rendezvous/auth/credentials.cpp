// The process default is a plain static: the agent sets it before it connects anywhere and its
// store clients read it on the same thread; tests set and reset it around a case.

#include "rendezvous/auth/credentials.hpp"

namespace ddp::rdzv::auth {
namespace {

std::shared_ptr<const Credentials>& slot() {
  static std::shared_ptr<const Credentials> credentials;
  return credentials;
}

}  // namespace

std::shared_ptr<const Credentials> default_credentials() { return slot(); }

void set_default_credentials(std::shared_ptr<const Credentials> credentials) {
  slot() = std::move(credentials);
}

}  // namespace ddp::rdzv::auth
