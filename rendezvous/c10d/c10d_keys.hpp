#pragma once
// The store keys of the c10d rendezvous, relative to /ddprun/<run_id>/. Job-wide keys are few
// and written rarely; everything a node writes often is a key of its own or a counter (add), so
// the store's work grows linearly with the number of nodes. Layout: docs/rendezvous.md.

#include <string>
#include <vector>

#include "rendezvous/store/prefix_store.hpp"

namespace ddp::rdzv::c10d_keys {

inline constexpr const char* kClosed = "closed";      // why the job ended (failed, finished)
inline constexpr const char* kRestarts = "restarts";  // counter: job-wide restarts spent
inline constexpr const char* kLatest = "latest";      // the last round that closed
// r<N>/size and r<N>/assignment of a round the job ended before
inline constexpr const char* kClosedSize = "closed";

// Where every key of run `run_id` lives (PrefixStore adds the "/" after it).
inline std::string prefix(const std::string& run_id) { return "/ddprun/" + run_id; }
// The base of a node's store lease (store_lease.hpp): "<base>/lease" and "<base>/lease.held".
inline std::string lease_base(const std::string& node) { return "nodes/" + node; }
// The same base as the store sees it, under the run's prefix: what a LeaseHolder holds.
inline std::string full_lease_base(const std::string& run_id, const std::string& node) {
  return prefixed_key(prefix(run_id), lease_base(node));
}

// A one-key list for check/wait. (A braced list inside a co_await expression trips GCC 12.)
inline std::vector<std::string> one(std::string key) {
  return std::vector<std::string>(1, std::move(key));
}

inline std::string round_key(int round, const std::string& name) {
  std::string key = std::to_string(round);  // (not "r" + ...: GCC 12 -O3 false -Wrestrict)
  key.insert(key.begin(), 'r');
  key += '/';
  key += name;
  return key;
}
inline std::string join(int round) { return round_key(round, "join"); }  // counter: arrivals
inline std::string size(int round) { return round_key(round, "size"); }  // members, set once
inline std::string node(int round, int index) {  // descriptor of the index-th arrival
  return round_key(round, "node/" + std::to_string(index));
}
inline std::string heartbeat(int round, int index) {
  return round_key(round, "hb/" + std::to_string(index));
}
inline std::string assignment(int round) { return round_key(round, "assignment"); }  // header
inline std::string place(int round, int index) {  // the index-th arrival's place, if a member
  return round_key(round, "place/" + std::to_string(index));
}
inline std::string change(int round) { return round_key(round, "change"); }  // append-only log
inline std::string failed(int round) { return round_key(round, "failed"); }  // first failure
inline std::string restart_count(int round) { return round_key(round, "restart_count"); }
inline std::string finished(int round) { return round_key(round, "finished"); }  // counter
inline std::string all_finished(int round) { return round_key(round, "all_finished"); }
inline std::string left(int round) { return round_key(round, "left"); }  // counter
// The roll call of a failure verdict: "<generation> <caller>" (store_roll_call.hpp); answers
// count at r<N>/roll/<generation>.
inline std::string roll_call(int round) { return round_key(round, "roll"); }
inline std::string standby(int round) { return round_key(round, "standby"); }  // counter: spares

}  // namespace ddp::rdzv::c10d_keys
