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

boost::asio::awaitable<void> RoundWorkerGuard::admit_round(EtcdKv& client,
                                                           const std::string& run_id,
                                                           const RendezvousInfo& info) {
  const auto members = members_;  // a new round may replace members_ while we read
  if (!members) co_return;
  if (info.group_rank == 0) {
    RangeRequest joins;
    joins.key = keys::joins(keys::job(run_id), info.round);
    joins.range_end = prefix_end(joins.key);
    const RangeResponse records = co_await client.range(std::move(joins));
    const auto admit = [&](const std::string& text) {
      boost::system::error_code ec;
      const auto address = boost::asio::ip::make_address(text, ec);
      if (!ec) members->add_fixed(address);
    };
    for (const KeyValue& kv : records.kvs) {
      const NodeDesc desc = decode_node_desc(kv.value, kv.key);
      admit(desc.addr);
      for (const std::string& text : desc.addresses) admit(text);
    }
    log::get("rdzv")->debug("workers' store of round {} admits {}", info.round,
                            fmt::join(members->addresses(), ","));
  }
  members->settle();
}

}  // namespace ddp::rdzv::etcd
