#pragma once
// MemberList: the addresses a store that serves workers admits without a handshake (PyTorch's
// clients cannot authenticate): loopback, the host's own addresses, and the addresses its job's
// agents connect from while they are connected. Shared by the job's stores on one agent (the
// rendezvous store fills it, the workers' stores read it); used on the agent's io_context only.

#include <boost/asio/ip/address.hpp>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ddp::rdzv::auth {

class MemberList : public std::enable_shared_from_this<MemberList> {
 public:
  // Keeps the member while the returned handle lives.
  using Hold = std::shared_ptr<const void>;

  static std::shared_ptr<MemberList> create() { return std::shared_ptr<MemberList>(new MemberList); }

  // An address admitted for the list's lifetime (one of the host's own).
  void add_fixed(const boost::asio::ip::address& address);
  // An address admitted until the handle is dropped: an agent's connection. Several holds on
  // one address (an agent's three connections, several agents on one node) count up.
  Hold hold(const boost::asio::ip::address& address);

  // True for loopback addresses and for every fixed or held address. A link-local IPv6 member
  // with a scope (fe80::1%veth0) admits that address on that interface only; one without a
  // scope admits it on every interface.
  bool admits(const boost::asio::ip::address& address) const;

  // A list is settled unless told otherwise. One still being filled (an etcd round's, until its
  // host has read the round's members) makes its store hold a stranger's connection, unread,
  // until settle() or the handshake deadline, and decide then.
  void set_unsettled() { settled_ = false; }
  void settle();
  bool is_settled() const { return settled_; }
  // Calls `fn` once, when the list is settled (at once when it is). For the store's waiting
  // connections: the list stays const to them.
  void on_settled(std::function<void()> fn) const;
  // The fixed and held addresses, sorted, as text.
  std::vector<std::string> addresses() const;

 private:
  MemberList() = default;
  void release(const std::string& key);

  std::set<std::string> fixed_;
  std::map<std::string, int> held_;  // address -> holds
  bool settled_ = true;
  mutable std::vector<std::function<void()>> waiting_;  // on_settled() callbacks
};

// The form members are kept in: an IPv4-mapped IPv6 address (an IPv4 peer of a "::" listener)
// as IPv4, so that the same node is one member whichever socket it reached; an IPv6 address
// without its scope unless it is link-local (where the scope names the interface).
boost::asio::ip::address canonical_address(const boost::asio::ip::address& address);

}  // namespace ddp::rdzv::auth
