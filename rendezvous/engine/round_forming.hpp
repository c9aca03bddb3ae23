#pragma once
// Forming a round by arrivals, once for every backend: after a node joined round N, when it
// closes the round (at max_nodes, at the size the round before predicts, at the last call once
// min_nodes came), when it re-counts the members it expects, the progress line and the join
// timeout. The backend supplies the mechanism (FormingRound): c10d waits on the round's header key
// and counts its arrival counter; etcd watches the assignment key from its join's revision and
// counts the live join keys. Runs on the agent's io_context.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/engine/round_settings.hpp"
#include "rendezvous/rendezvous.hpp"

namespace ddp::rdzv {

// What the forming of one round goes by besides the backend's RoundSettings.
struct FormingRules {
  const char* backend = "";  // "c10d", "etcd": the timeout's message names it
  int round = 0;
  // At most this long between two counts: the progress line's period, stretched by each backend
  // with max_nodes so that the waiting nodes' counts together stay within what its service takes.
  std::chrono::milliseconds progress_period{0};
  // While FormingRound::recounts holds, at most this long between two re-counts.
  std::chrono::milliseconds recount_period{0};
};

// A count of the round being formed.
struct Arrivals {
  int arrived = 0;  // nodes that joined the round so far
  // With a re-count: the members of the round before still alive, the size the round expects.
  std::optional<int> alive;
};

// One backend's side of a round this node joined (its keys, its waits). Lives for one call of
// form_round; what each operation costs is the backend's (c10d_rendezvous.cpp,
// etcd_rendezvous.cpp).
class FormingRound {
 public:
  virtual ~FormingRound() = default;
  // Waits until the round's header exists (true; the backend keeps what it read) or `until`
  // passes (false). Throws RendezvousClosedError when the job's end closed the round.
  virtual asio::awaitable<bool> wait_closed(std::chrono::steady_clock::time_point until) = 0;
  // Whether the count after a wait re-counts the members expected, with `expected` members
  // expected and `arrived` counted last: a member of the round before may have died since the
  // expected size was read.
  virtual bool recounts(int expected, int arrived) const = 0;
  // The arrivals now, and with recounts(expected, arrivals) the members still alive. May throw
  // RendezvousClosedError (the job closed, or too few are left to run it).
  virtual asio::awaitable<Arrivals> count(int expected) = 0;
  // Closes the round with the arrivals 1..size, unless another node closed it first.
  virtual asio::awaitable<void> close(int size) = 0;
  // Throws RendezvousClosedError when the job is closed (where count() read that already: no
  // request).
  virtual asio::awaitable<void> throw_if_closed() = 0;
  // The names of at most `count` nodes that joined, for the timeout's message (c10d: two
  // requests a name; etcd: one read).
  virtual asio::awaitable<std::vector<std::string>> joined_names(int count) = 0;
};

// Waits until the round that `round` formed closed, closing it when this node's arrival (`index`,
// 1-based) or a later count says so; `expected`: the size the round before predicts (0: none).
// Returns once round.wait_closed() returned true. Throws TimeoutError (the message names the
// rendezvous, the round, the nodes that joined and how many more are needed) at `deadline`, and
// whatever the backend's operations throw.
asio::awaitable<void> form_round(FormingRound& round, const RoundSettings& settings,
                                 const FormingRules& rules, int index, int expected,
                                 std::chrono::steady_clock::time_point deadline);

// The info lines of a node that joined round `round` too late to be among its `size` members:
// it waits for the next round, for which the members restart when there is room ("waiting"), or
// stands by for a free slot in a full round.
void log_late_join(const std::string& run_id, int round, int size, int max_nodes);

}  // namespace ddp::rdzv
