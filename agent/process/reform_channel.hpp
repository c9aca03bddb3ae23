#pragma once
// ReformChannel: the hand-over channel of --recovery=inprocess. A Unix stream socket in the run
// directory that every worker of this node may connect to (ddprun.elastic does); through it the
// agent hands a live worker its place in a new round and hears back once the worker re-formed.
// Runs on the agent's io_context; never blocks it. The protocol, one text line each way:
//
//   worker -> agent   hello <local_rank> <pid>        (first line; a later hello replaces it)
//                     reformed <round>                (its process group of <round> is up)
//   agent -> worker   place {"round":N,"env":{...}}   (on hello, and on every publish())
//
// docs/agent.md has the worker's side in prose.

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/worker_handover.hpp"

namespace ddp::agent {

class ReformChannel final : public WorkerHandover {
 public:
  // Listens at `path` (replacing a stale file). A path too long for a socket address
  // (108 bytes) is served under Linux's abstract namespace instead, "@ddprun-reform-<pid>".
  // Throws IoError naming the path when the socket cannot be bound.
  ReformChannel(boost::asio::io_context& io, const std::string& path);
  ~ReformChannel() override;  // closes every connection and removes the socket file
  ReformChannel(const ReformChannel&) = delete;
  ReformChannel& operator=(const ReformChannel&) = delete;

  // The socket's path, or "@<name>" for an abstract one.
  std::string address() const override;
  void publish(const std::vector<WorkerPlace>& places) override;
  boost::asio::awaitable<std::vector<int>> wait_reformed(
      int round, const std::vector<int>& local_ranks, std::chrono::milliseconds timeout) override;
  int connected_pid(int local_rank) const override;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the accept and read loops, which may outlive this
};

// The place line for `place` ("place {json}\n"), as the channel sends it (tests read it back).
std::string encode_place_line(const WorkerPlace& place);

}  // namespace ddp::agent
