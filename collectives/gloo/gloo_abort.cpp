// GlooProcessGroup::abort. Gloo's own way to end a blocked transfer is the one its TCP transport
// takes when a socket fails or a wait times out: tcp::Pair::signalExceptionExternal hands the
// exception to every buffer with a send or recv pending on the pair (their waiters wake and
// throw), remembers it (later posts on the pair throw it) and closes the socket (the peer sees
// the connection close, and its operations with us fail too). Pair::close() and
// Context::closeConnections() only close the socket: a pending recv then waits out its timeout.
// signalExceptionExternal is protected; a derived class may name it, and the member pointer it
// forms applies to every tcp::Pair, so abort calls exactly the code path of a Gloo timeout.
#include <fmt/format.h>
#include <gloo/context.h>
#include <gloo/transport/tcp/pair.h>

#include "collectives/gloo/gloo_process_group.hpp"
#include "collectives/shm/shm_collectives.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"

namespace ddp::coll {
namespace {

struct PairFailure : gloo::transport::tcp::Pair {
  static auto signal() { return &PairFailure::signalExceptionExternal; }
};

}  // namespace

void GlooProcessGroup::fail_transfers(gloo::Context& context, const std::string& why) {
  for (int peer = 0; peer < context.size; ++peer) {
    auto* pair = dynamic_cast<gloo::transport::tcp::Pair*>(context.getPair(peer).get());
    if (pair != nullptr) (pair->*PairFailure::signal())(why);
  }
}

bool GlooProcessGroup::abort() {
  const std::string why =
      fmt::format("the gloo group of {} ranks was aborted on rank {}", size_, global_ranks_[rank_]);
  {
    std::lock_guard lock(broken_mutex_);
    if (aborted_.exchange(true)) return true;
    if (broken_.empty()) broken_ = why;
  }
  if (shm_) shm_->abort();
  if (host_shm_) host_shm_->abort();
  if (context_) fail_transfers(*context_, why);
  if (leaders_) fail_transfers(*leaders_, why);
  std::vector<std::shared_ptr<GlooProcessGroup>> sub_groups;
  {
    std::lock_guard lock(sub_groups_mutex_);
    for (const auto& weak : sub_groups_) {
      if (auto group = weak.lock()) sub_groups.push_back(std::move(group));
    }
  }
  for (const auto& group : sub_groups) group->abort();
  log::get("coll")->info("{}", why);
  return true;
}

void GlooProcessGroup::throw_if_broken(const char* name, std::uint64_t seq) {
  std::lock_guard lock(broken_mutex_);
  if (broken_.empty()) return;
  const std::string op = seq > 0 ? fmt::format("{} #{}", name, seq) : std::string(name);
  if (aborted_.load()) throw IoError(fmt::format("gloo {}: {}", op, broken_));
  throw IoError(
      fmt::format("gloo {}: the group is unusable after an earlier failure: {}", op, broken_));
}

}  // namespace ddp::coll
