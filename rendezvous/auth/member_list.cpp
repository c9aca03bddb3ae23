// Members are kept as text of the canonical address: v4-mapped forms and the scope ids of
// addresses that need none would otherwise make one node two members. A link-local IPv6 address
// keeps its scope (the interface, on this machine, that the peer is on): the same fe80:: address
// on another interface is another machine. One given without a scope (a member record from
// another node, whose interface names mean nothing here) matches on any interface. A hold's deleter keeps only a weak reference, so a
// connection that outlives the list (a store closing after the agent dropped the list) is safe.

#include "rendezvous/auth/member_list.hpp"

#include <utility>

namespace ddp::rdzv::auth {

namespace ip = boost::asio::ip;

ip::address canonical_address(const ip::address& address) {
  if (!address.is_v6()) return address;
  const ip::address_v6 v6 = address.to_v6();
  if (v6.is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, v6);
  if (v6.is_link_local() || v6.scope_id() == 0) return address;
  return ip::address_v6(v6.to_bytes());
}

void MemberList::add_fixed(const ip::address& address) {
  fixed_.insert(canonical_address(address).to_string());
}

MemberList::Hold MemberList::hold(const ip::address& address) {
  std::string key = canonical_address(address).to_string();
  ++held_[key];
  return Hold(static_cast<const void*>(this),
              [weak = weak_from_this(), key = std::move(key)](const void*) {
                if (auto list = weak.lock()) list->release(key);
              });
}

void MemberList::release(const std::string& key) {
  const auto it = held_.find(key);
  if (it != held_.end() && --it->second <= 0) held_.erase(it);
}

bool MemberList::admits(const ip::address& address) const {
  const ip::address canonical = canonical_address(address);
  if (canonical.is_loopback()) return true;
  const auto is_member = [&](const std::string& key) {
    return fixed_.count(key) > 0 || held_.count(key) > 0;
  };
  if (is_member(canonical.to_string())) return true;
  // A scoped link-local peer is also admitted by the address given without a scope.
  return canonical.is_v6() && canonical.to_v6().scope_id() != 0 &&
         is_member(ip::address_v6(canonical.to_v6().to_bytes()).to_string());
}

void MemberList::settle() {
  settled_ = true;
  for (auto& fn : std::exchange(waiting_, {})) fn();
}

void MemberList::on_settled(std::function<void()> fn) const {
  if (settled_) {
    fn();
    return;
  }
  waiting_.push_back(std::move(fn));
}

std::vector<std::string> MemberList::addresses() const {
  std::set<std::string> all = fixed_;
  for (const auto& [key, count] : held_) all.insert(key);
  return {all.begin(), all.end()};
}

}  // namespace ddp::rdzv::auth
