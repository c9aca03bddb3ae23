// The round's addresses are held, not fixed, so that the next round's list replaces them: a node
// that left the job stops being admitted. Connections already open stay (the guard decides at
// accept), which is what a member of the previous round withdrawing its lease needs.

#include "rendezvous/etcd/etcd_link_guard.hpp"

#include "rendezvous/net_address.hpp"

namespace ddp::rdzv::etcd {

LinkStoreGuard::LinkStoreGuard(std::shared_ptr<const auth::Credentials> credentials,
                               bool members_only)
    : credentials_(std::move(credentials)) {
  if (credentials_ || !members_only) return;
  members_ = auth::MemberList::create();
  for (const auto& address : local_addresses()) members_->add_fixed(address);
}

StoreGuard LinkStoreGuard::guard() const {
  if (credentials_) return StoreGuard{credentials_, nullptr, nullptr};
  return StoreGuard{nullptr, members_, nullptr};
}

void LinkStoreGuard::open_round() {
  if (members_) members_->set_unsettled();
}

void LinkStoreGuard::admit_round(const std::vector<boost::asio::ip::address>& nodes) {
  if (!members_) return;
  std::vector<auth::MemberList::Hold> round;
  round.reserve(nodes.size());
  for (const auto& address : nodes) round.push_back(members_->hold(address));
  round_ = std::move(round);  // the previous round's holds go after the new ones are taken
  members_->settle();
}

}  // namespace ddp::rdzv::etcd
