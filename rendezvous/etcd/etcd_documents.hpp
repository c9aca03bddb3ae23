#pragma once
// The documents of an etcd round: each node's descriptor (its join key's value) and the round's
// header, written once by the transaction that closes the round. Members are named by the create
// revisions of their join keys, in runs of consecutive revisions with one local world size: joins
// are nearly the only writes while a round fills, so a round of any size is a run or a few, and
// the header stays small. A member finds its own group rank (its place in revision order) and
// rank base in the runs without another read. Pure functions; no etcd, no Asio.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/engine/derived_round.hpp"
#include "rendezvous/etcd/etcd_json.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv::etcd {

struct NodeDesc {
  std::string name;
  std::string addr;
  int local_world_size = 1;
  std::string master_addr;  // the worker store this node opened for the round
  std::uint16_t master_port = 0;
  // Every address the node holds but loopback: the workers' store of the round admits them all
  // (docs/security.md). Absent from the document when empty.
  std::vector<std::string> addresses = {};
  std::uint16_t link_port = 0;  // this agent's link store (etcd_links.hpp) on addr; 0: none
  // >= 0: the record of a member of a derived round (etcd_reform.cpp), at this group rank there.
  // Absent from the document when -1 (a join).
  int group_rank = -1;
  int rank_hint = -1;  // >= 0: the node's wished place (--node_rank); absent when -1
};

// Members whose join keys have the create revisions first, first+1, ..., first+count-1, each with
// `lws` workers.
struct MemberRun {
  std::int64_t first = 0;
  int count = 0;
  int lws = 0;
  bool operator==(const MemberRun&) const = default;
};

struct RoundHeader {
  int round = 0;
  int size = 0;               // members (group world size)
  std::int64_t revision = 0;  // the store's revision when the closer read the members
  int restart_count = 0;      // job-wide restarts spent when the round closed
  std::string master_addr;    // group rank 0's worker store
  std::uint16_t master_port = 0;
  std::vector<MemberRun> runs;  // in group-rank (create revision) order
  std::string closer;           // the node whose transaction closed the round (logs)
  std::string host;             // group rank 0's name: the members' link goes to its agent
  std::uint16_t link_port = 0;  // group rank 0's link store on master_addr; 0: no links
  // Derived from the round before (engine/derived_round.hpp): its members' records in r<N>/join/
  // name their group ranks, and `runs` are the round before's minus the lost. Never encoded: a
  // derived round's assignment key holds its plan, and each member derives the header.
  bool derived = false;
};

std::string encode(const NodeDesc& desc);
// Each decode throws IoError naming `what` when the text is not that document.
NodeDesc decode_node_desc(std::string_view text, const std::string& what);
std::string encode(const RoundHeader& header);
RoundHeader decode_round_header(std::string_view text, const std::string& what);

// The header of a round whose members are `members` (join keys read at `revision`, in ascending
// create revision): nodes with a rank hint first, by hint (a --hostfile launch's file order),
// then the others by arrival. REQUIRES: members is not empty.
RoundHeader header_for(int round, int restart_count, std::int64_t revision,
                       const std::vector<KeyValue>& members, std::string closer);

// The round derived from `prev` by `plan` (closed by `closer`): the lost members' runs cut out,
// the plan's worker store when it names one.
RoundHeader derive(const RoundHeader& prev, const DerivedRound& plan, std::string closer);
// What a node late for round `round` learns from a derived plan there: its size.
RoundHeader late_header(int round, const Bytes& plan);

// The group rank of the member whose join key has `create_revision`; nullopt when it is none.
std::optional<int> group_rank_of(const RoundHeader& header, std::int64_t create_revision);
// The create revision of the join key of the member at `group_rank`; nullopt when it is none.
std::optional<std::int64_t> revision_of(const RoundHeader& header, int group_rank);
int world_size(const RoundHeader& header);
// The global rank of local rank 0 on the member at `group_rank`.
int rank_base(const RoundHeader& header, int group_rank);
RendezvousInfo info_for(const RoundHeader& header, int group_rank, const std::string& run_id);

// r<N>/ev/failed holds "<restart count> <node> <what>".
std::string failed_value(int restart_count, const std::string& node, const std::string& what);
int failed_restart_count(const std::string& value);   // 0 when the value has no count
std::string failed_detail(const std::string& value);  // "<node> <what>"

}  // namespace ddp::rdzv::etcd
