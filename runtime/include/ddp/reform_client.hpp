#pragma once
// ReformClient: a worker's end of ddprun's hand-over channel (--recovery=inprocess), the native
// counterpart of ddprun.elastic's. The agent hands every live worker its place in a new round
// (rank, world size, store address, round); the worker tears its group down, joins the new one
// (ddp::init_at) and reports back with reformed(). A thread of the client's reads the channel, so a
// place arrives while the training thread is blocked in a collective. On that thread the client
// calls the place handler as each new place arrives (ddp-train aborts its NCCL or Gloo group there
// when the new round has lost a member), and the overdue handler when the training thread has not
// taken it in time (ddp-train aborts its group, or leaves its last commit in a file and exits with
// kGiveUpExit). In time: while the training thread trains, it reports each commit (progressed()) at
// least every `grace`, and a place is due `grace` after its last commit, or at its arrival if that
// is later (a thread silent for longer is blocked, and is not waited for again); from a place taken
// (or the client's start) to its next commit it forms a group, which waits for peers as long as
// they take, and a place is due `grace` after its arrival. docs/agent.md has the protocol,
// docs/elastic.md the recovery.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace ddp {

// One place: the round and the launcher variables that change with it (RANK, WORLD_SIZE,
// LOCAL_RANK, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, ...).
struct ReformPlace {
  int round = -1;
  std::map<std::string, std::string> env;
};

// The exit code of a worker that gave up a blocked process after leaving its commit in a file.
inline constexpr int kReformGiveUpExit = 75;

class ReformClient {
 public:
  // Called on the client's thread with the round whose place is overdue (see the class comment).
  // Returns true when it freed the training thread some other way (aborted its group): the
  // place then waits another `grace`, after which the handler is called again. Returning false
  // (or not at all: it may end the process), it is not called again.
  using OverdueHandler = std::function<bool(int round)>;
  // Called on the client's thread with each place for a round after every earlier place, as it
  // arrives (before the training thread can take it, or while it is taking it). Must not block.
  using PlaceHandler = std::function<void(const ReformPlace& place)>;

  // The client of the channel the launcher named in DDPRUN_REFORM_SOCKET, speaking for
  // DDPRUN_REFORM_LOCAL_RANK (else LOCAL_RANK); nullptr when that variable is unset or empty (no
  // --recovery=inprocess, or another launcher). Throws as the constructor.
  static std::unique_ptr<ReformClient> from_env(std::chrono::milliseconds grace,
                                                OverdueHandler on_overdue,
                                                PlaceHandler on_place = nullptr);

  // Connects to `address` (a socket path, or "@name" in the abstract namespace) and says hello.
  // Throws IoError naming the address when it cannot connect.
  ReformClient(const std::string& address, int local_rank, std::chrono::milliseconds grace,
               OverdueHandler on_overdue, PlaceHandler on_place = nullptr);
  ~ReformClient();  // stops the thread and closes the connection
  ReformClient(const ReformClient&) = delete;
  ReformClient& operator=(const ReformClient&) = delete;

  // The newest place if it is for a round after `round`, without waiting; else nullopt. Throws
  // IoError once the channel has failed (the agent is gone).
  std::optional<ReformPlace> newer_than(int round);

  // Waits until the agent hands over a place for a round after `round` and takes it (it is no
  // longer overdue). Throws IoError when the channel fails first.
  ReformPlace wait_newer_than(int round);

  // On the training thread: it committed a step (so it is not blocked). See the class comment.
  void progressed();

  // Tells the agent that this worker's group of `round` is up and its state synced. Throws
  // IoError when the channel is gone.
  void reformed(int round);

  // DDPRUN_REFORM_STATE_DIR: where a worker that gives up leaves its commit; "" when unset.
  static std::string state_dir_from_env();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
