#pragma once
// WorkerHandover: how the agent tells live workers their place in a new round and learns that
// they re-formed (--recovery=inprocess). ReformChannel (agent/process/reform_channel.hpp) speaks
// to the workers over a Unix socket; the agent's unit tests script the workers' answers with a
// fake (tests/unit/agent/core/fake_handover.hpp). Used on the agent's thread.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/reform_protocol.hpp"

namespace ddp::agent {

// The channel's variables (common/reform_protocol.hpp): the socket, the local rank a worker
// speaks for, and where a worker that gives up its place leaves its last commit.
inline constexpr const char* kReformSocketEnv = reform::kSocketEnv;
inline constexpr const char* kReformLocalRankEnv = reform::kLocalRankEnv;
inline constexpr const char* kReformStateDirEnv = reform::kStateDirEnv;

// One worker's place in a round: the round and the torchrun variables that change with it
// (RANK, WORLD_SIZE, MASTER_PORT, ...), as the worker's environment would carry them.
struct WorkerPlace {
  int round = 0;
  int local_rank = 0;
  std::map<std::string, std::string> env;
};

class WorkerHandover {
 public:
  virtual ~WorkerHandover() = default;

  // What a worker's kReformSocketEnv holds. "" when there is no channel to reach.
  virtual std::string address() const = 0;

  // Makes `places` (one per local rank) the current round's: sent at once to every worker that
  // is connected, and to a worker that connects later as its first message.
  virtual void publish(const std::vector<WorkerPlace>& places) = 0;

  // Waits until every local rank in `local_ranks` has reported that it re-formed in `round`, has
  // no connection (it never used the channel, or its process is gone: it cannot re-form), or
  // `timeout` passed. Returns the local ranks that did not re-form, in order; empty when all did.
  // Cancellable (per-operation cancellation).
  virtual boost::asio::awaitable<std::vector<int>> wait_reformed(
      int round, const std::vector<int>& local_ranks, std::chrono::milliseconds timeout) = 0;

  // The pid that the latest process to connect as `local_rank` said hello with (it may have
  // exited since); 0 when no process has connected as that local rank.
  virtual int connected_pid(int local_rank) const = 0;
};

}  // namespace ddp::agent
