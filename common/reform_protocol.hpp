#pragma once
// The hand-over channel of --recovery=inprocess as bytes, shared by both ends: the agent
// (agent/process/reform_channel.*) and libddp's worker client (ddp/reform_client.hpp);
// ddprun.elastic speaks the same lines in Python. Sans-IO: no socket here. One text line each way:
//
//   worker -> agent   hello <local_rank> <pid>        (first line; a later hello replaces it)
//                     reformed <round>                (its process group of <round> is up)
//   agent -> worker   place {"round":N,"env":{...}}   (on hello, and at every hand-over)

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddp::reform {

// The variables through which a worker finds the channel, the local rank it speaks for
// (LOCAL_RANK is 0 for every worker under --virtual_local_rank), and the directory where a
// worker that gives up a blocked process leaves its last commit (the run dir).
inline constexpr const char* kSocketEnv = "DDPRUN_REFORM_SOCKET";
inline constexpr const char* kLocalRankEnv = "DDPRUN_REFORM_LOCAL_RANK";
inline constexpr const char* kStateDirEnv = "DDPRUN_REFORM_STATE_DIR";

// The exit code of a worker that gave up a blocked process after leaving its commit (EX_TEMPFAIL).
inline constexpr int kGiveUpExit = 75;

// A worker sends two short lines in its life; a longer one is not a worker speaking.
inline constexpr std::size_t kMaxWorkerLineBytes = 4096;
// A place line carries a dozen variables; a longer one is not the agent speaking.
inline constexpr std::size_t kMaxPlaceLineBytes = 1 << 16;

// A worker's place in a round: the round and the torchrun variables that change with it (RANK,
// WORLD_SIZE, MASTER_PORT, ...).
struct Place {
  int round = 0;
  std::map<std::string, std::string> env;
};

// Each encoder returns one whole line, '\n' included.
std::string encode_hello(int local_rank, long pid);
std::string encode_reformed(int round);
std::string encode_place(const Place& place);

// A worker's line, without its '\n'.
struct WorkerLine {
  enum class Kind { kHello, kReformed, kUnknown, kBad };
  Kind kind = Kind::kUnknown;
  int local_rank = -1;  // kHello
  long pid = 0;         // kHello
  int round = -1;       // kReformed
};
WorkerLine parse_worker_line(std::string_view line);

// The agent's line, without its '\n': the place, or nullopt for a line that is not a well-formed
// place (an unknown verb is ignored by the worker, as new verbs may come).
std::optional<Place> parse_place_line(std::string_view line);

}  // namespace ddp::reform
