// The members are read by the one node whose store the workers use, once per round: one range
// over the round's join keys, the same O(size) read the closer made. Join keys of nodes that
// arrived after the close (waiting for the next round) are read too; they are the job's agents,
// so admitting their nodes gives nobody outside the job anything.

#include "rendezvous/etcd/etcd_worker_guard.hpp"

#include <boost/asio/ip/address.hpp>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "rendezvous/auth/auth_protocol.hpp"
#include "rendezvous/etcd/etcd_documents.hpp"
#include "rendezvous/etcd/etcd_keys.hpp"
#include "rendezvous/net_address.hpp"

namespace ddp::rdzv::etcd {

std::vector<std::string> node_addresses() {
  std::vector<std::string> out;
  for (const auto& address : local_addresses()) {
    if (auth::is_reportable(address)) out.push_back(auth::canonical_address(address).to_string());
  }
  return out;
}

StoreGuard RoundWorkerGuard::open_round() {
  members_.reset();
  if (!members_only_) return StoreGuard{};
  members_ = auth::MemberList::create();
  for (const auto& address : local_addresses()) members_->add_fixed(address);
  members_->set_unsettled();
  return StoreGuard{nullptr, members_, nullptr};
}

void RoundWorkerGuard::admit_round(const RendezvousInfo& info,
                                   const std::vector<boost::asio::ip::address>& nodes) {
  if (!members_) return;
  if (info.group_rank == 0) {
    for (const auto& address : nodes) members_->add_fixed(address);
    log::get("rdzv")->debug("workers' store of round {} admits {}", info.round,
                            fmt::join(members_->addresses(), ","));
  }
  members_->settle();
}

boost::asio::awaitable<std::vector<boost::asio::ip::address>> round_node_addresses(
    EtcdKv& client, const std::string& run_id, int round) {
  RangeRequest joins;
  joins.key = keys::joins(keys::job(run_id), round);
  joins.range_end = prefix_end(joins.key);
  const RangeResponse records = co_await client.range(std::move(joins));
  std::vector<boost::asio::ip::address> out;
  const auto add = [&](const std::string& text) {
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(text, ec);
    if (!ec) out.push_back(address);
  };
  for (const KeyValue& kv : records.kvs) {
    const NodeDesc desc = decode_node_desc(kv.value, kv.key);
    add(desc.addr);
    for (const std::string& text : desc.addresses) add(text);
  }
  co_return out;
}

}  // namespace ddp::rdzv::etcd
