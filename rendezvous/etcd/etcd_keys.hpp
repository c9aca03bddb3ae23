#pragma once
// The etcd keys of one job, under /ddprun/<run_id>/. A member watches its round's prefix r<N>/
// only, so what lives there is what a running member must react to: its peers' join keys (a
// DELETE is a lost node: the key is bound to the node's lease), and ev/ keys (failure, job
// closed, late node waiting, exit barrier passed, the failure verdict's roll call). Per-node keys
// that would wake every member for nothing (the exit barrier's done/ keys, the roll call's
// answers) live outside it. Layout: docs/rendezvous.md.

#include <string>

namespace ddp::rdzv::etcd::keys {

inline std::string job(const std::string& run_id) { return "/ddprun/" + run_id + "/"; }
inline std::string round(const std::string& job, int n) {
  return job + "r" + std::to_string(n) + "/";
}
inline std::string latest(const std::string& job) { return job + "latest"; }  // last closed round
inline std::string restarts(const std::string& job) { return job + "restarts"; }  // job-wide
inline std::string closed(const std::string& job) { return job + "closed"; }  // why the job ended
inline std::string joins(const std::string& job, int n) { return round(job, n) + "join/"; }
inline std::string join(const std::string& job, int n, const std::string& name) {
  return joins(job, n) + name;  // the node's descriptor, bound to its lease
}
inline std::string assignment(const std::string& job, int n) {
  return round(job, n) + "assignment";  // the round's header: written once, by one txn
}
inline std::string events(const std::string& job, int n) { return round(job, n) + "ev/"; }
inline std::string failed(const std::string& job, int n) { return events(job, n) + "failed"; }
inline std::string closed_event(const std::string& job, int n) { return events(job, n) + "closed"; }
inline std::string all_finished(const std::string& job, int n) {
  return events(job, n) + "all_finished";
}
inline std::string waiting(const std::string& job, int n, const std::string& name) {
  return events(job, n) + "waiting/" + name;
}
// A member lost by connection (etcd_links.hpp): "<after_ms>", put in the transaction that deletes
// its join key, so that every watch reads how the loss was found before it sees the key go.
inline std::string lost(const std::string& job, int n, const std::string& name) {
  return events(job, n) + "lost/" + name;
}
// The failure verdict's roll call: the first member whose workers fail creates roll_call; every
// member answers with present/r<N>/<node> (bound to its lease, outside the round's prefix so that
// no member's watch carries the answers), and the answer that completes the count puts all_present.
inline std::string roll_call(const std::string& job, int n) { return events(job, n) + "roll_call"; }
inline std::string all_present(const std::string& job, int n) {
  return events(job, n) + "all_present";
}
// The answers' tally (a node's answer is presents(...) + <node>, EtcdCoordination::arrive).
inline std::string presents(const std::string& job, int n) {
  return job + "present/r" + std::to_string(n) + "/";
}
// The exit barrier's tally of finished members (done/r<N>/<node>).
inline std::string dones(const std::string& job, int n) {
  return job + "done/r" + std::to_string(n) + "/";
}

// The value of r<N>/assignment for a round the job ended before.
inline constexpr const char* kClosedRound = "closed";

}  // namespace ddp::rdzv::etcd::keys
