// The member list starts with this machine's own addresses, so the host's own workers, which
// reach the workers' store at the host's advertised (non-loopback) address, are members before
// any agent connects. Loopback is admitted by the list itself.

#include "rendezvous/job_guards.hpp"

#include <boost/asio/ip/address.hpp>

#include "common/log.hpp"
#include "rendezvous/net_address.hpp"

namespace ddp::rdzv {

JobGuards::JobGuards(JobSecurity security)
    : security_(std::move(security)), members_(auth::MemberList::create()) {
  for (const auto& address : local_addresses()) members_->add_fixed(address);
}

StoreGuard JobGuards::rendezvous_store() const {
  return StoreGuard{security_.credentials, nullptr, members_};
}

StoreGuard JobGuards::worker_store() const {
  return StoreGuard{security_.credentials,
                    security_.worker_store_members_only ? members_ : nullptr, nullptr};
}

StoreGuard JobGuards::shared_store() const {
  if (!security_.credentials) return StoreGuard{};  // open, as torchrun's (docs/security.md)
  return StoreGuard{security_.credentials,
                    security_.worker_store_members_only ? members_ : nullptr, members_};
}

void warn_open_store(const std::string& what, const std::string& host, unsigned port) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  if (host == "localhost" || (!ec && address.is_loopback())) return;
  log::get("rdzv")->warn("{} at {}:{} is open to its network: anyone who reaches the port can "
                         "read, write and delete the job's keys (give the job a secret: "
                         "--rdzv_conf token_file=PATH, docs/security.md)",
                         what, host, port);
}

}  // namespace ddp::rdzv
