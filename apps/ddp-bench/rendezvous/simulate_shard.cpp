// The shard's side of the driver protocol, one line each way:
//   <- go            start every member's first round (the clock of "first join" starts here)
//   -> ready <connections>                      once every connection is open
//   -> placed <round> <start_ns> <last_ns> <members> <requests> <request_bytes> <reply_bytes>
//      <group_rank>...                          once every live member knows its place in
//                                               <round>; the counts are those members' own for
//                                               that round (from its start, or from the kill
//                                               before it, to their place: what their monitors
//                                               read of the loss counts too)
//   <- snap          -> snap <requests> <request_bytes> <reply_bytes>   (every member, so far)
//   <- mark          (no answer)      a loss comes: the next round's counts start here
//   <- kill          -> killed <ns>   this shard's first member dies as a SIGKILLed agent does:
//                                     its rendezvous is destroyed and its connections close
//                                     (shared ones stay open for the others, and its lease's
//                                     shared wait is parked again without it, see LinkLease)
//   <- quit          exit
//   -> error <what>  a member failed; the shard goes on, the driver gives up
// Times are steady_clock (CLOCK_MONOTONIC) nanoseconds, comparable across processes.

#include "apps/ddp-bench/rendezvous/simulate_shard.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "apps/ddp-bench/rendezvous/counting_store.hpp"
#include "apps/ddp-bench/rendezvous/link_lease.hpp"
#include "apps/ddp-bench/rendezvous/shared_link.hpp"
#include "common/log.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/c10d/c10d_rendezvous.hpp"

namespace ddp::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

std::int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void say(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

struct Member {
  int id = 0;
  std::unique_ptr<rdzv::TcpStoreClient> own;    // per_connection 1: calls
  std::unique_ptr<rdzv::TcpStoreClient> watch;  // per_connection 1: the change log's wait
  std::unique_ptr<MemberStore> shared;          // otherwise (waits go to the link's waits)
  LinkLease* lease = nullptr;                   // this member's lease connection, maybe shared
  WireCounts counts;
  std::unique_ptr<CountingStore> counted;
  std::unique_ptr<CountingStore> watched;  // the watch connection, counted too
  std::unique_ptr<rdzv::C10dRendezvous> rendezvous;  // reset: the member is gone
  Clock::time_point round_start;
  std::optional<WireCounts> at_kill;  // its counts when a member was killed
};

struct Round {  // what this shard's live members did in one round
  Clock::time_point start = Clock::time_point::max();
  Clock::time_point last{};
  int placed = 0;
  WireCounts counts;
  std::vector<int> ranks;
  bool reported = false;
};

class Shard {
 public:
  Shard(asio::io_context& io, const ShardOptions& o) : io_(io), o_(o), input_(io, 0) {}

  asio::awaitable<void> run() {
    co_await connect();
    say(fmt::format("ready {}", connections_));
    std::string buffer;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(input_, asio::dynamic_buffer(buffer), '\n',
                                                     asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      const std::string line = buffer.substr(0, n - 1);
      buffer.erase(0, n);
      if (line == "go") {
        start();
      } else if (line == "snap") {
        WireCounts total;
        for (const auto& m : members_) total += m->counts;
        say(fmt::format("snap {} {} {}", total.requests, total.request_bytes,
                        total.reply_bytes));
      } else if (line == "mark") {
        for (auto& m : members_) m->at_kill = m->counts;
      } else if (line == "kill") {
        Member& victim = *members_.front();
        for (auto& m : members_) m->at_kill = m->counts;
        say(fmt::format("killed {}", ns(Clock::now())));
        victim.rendezvous.reset();
        victim.own.reset();
        victim.watch.reset();
        --alive_;
        asio::co_spawn(io_, victim.lease->drop(lease_base(victim.id)), [](std::exception_ptr e) {
          if (e) say("error shard: the killed member's lease connection could not be replaced");
        });
      } else if (line == "quit") {
        break;
      }
    }
    io_.stop();
  }

 private:
  // The member's lease base, as C10dRendezvous names it.
  std::string lease_base(int id) const {
    return rdzv::c10d_keys::full_lease_base(o_.run_id, fmt::format("sim{}", id));
  }

  asio::awaitable<void> connect() {
    rdzv::ConnectOptions options;
    options.connect_timeout = std::chrono::seconds(120);
    options.call_timeout = std::chrono::seconds(600);
    const int count = o_.last - o_.first;
    const int per = std::max(o_.per_connection, 1);
    const int units = (count + per - 1) / per;  // links, or members with their own connections
    for (int i = 0; i < count; ++i) {
      members_.push_back(std::make_unique<Member>());
      members_.back()->id = o_.first + i;
    }
    if (per > 1) links_.resize(static_cast<std::size_t>(units));
    leases_.resize(static_cast<std::size_t>(units));
    // A few connects in flight at once, so that the store's listen backlog never overflows.
    int next = 0;
    auto opener = [&]() -> asio::awaitable<void> {
      while (next < units) {
        const int unit = next++;
        const auto u = static_cast<std::size_t>(unit);
        std::vector<std::string> bases;
        for (int i = unit * per; i < std::min(count, (unit + 1) * per); ++i) {
          bases.push_back(lease_base(o_.first + i));
        }
        if (per > 1) {
          links_[u] = co_await SharedLink::connect(o_.host, o_.port, options);
        } else {
          Member& m = *members_[u];
          m.own = co_await rdzv::TcpStoreClient::connect(o_.host, o_.port, options);
          m.watch = co_await rdzv::TcpStoreClient::connect(o_.host, o_.port, options);
        }
        leases_[u] = co_await LinkLease::open(o_.host, o_.port, options, std::move(bases));
      }
    };
    constexpr int kInFlight = 32;
    auto executor = co_await asio::this_coro::executor;
    int running = kInFlight;
    asio::steady_timer all_open(executor, Clock::time_point::max());
    std::exception_ptr failure;
    for (int i = 0; i < kInFlight; ++i) {
      asio::co_spawn(executor, opener(), [&](std::exception_ptr e) {
        if (e) failure = e;
        if (--running == 0) all_open.cancel();
      });
    }
    co_await all_open.async_wait(asio::as_tuple(asio::use_awaitable));
    if (failure) std::rethrow_exception(failure);
    connections_ = 3 * units;
    for (int i = 0; i < count; ++i) {
      Member& m = *members_[static_cast<std::size_t>(i)];
      const auto unit = static_cast<std::size_t>(i / per);
      m.lease = leases_[unit].get();
      rdzv::Store* base = m.own.get();
      if (per > 1) {
        m.shared = std::make_unique<MemberStore>(*links_[unit]);
        base = m.shared.get();
      }
      m.counted = std::make_unique<CountingStore>(*base, m.counts);
      rdzv::C10dSettings s;
      s.run_id = o_.run_id;
      s.max_nodes = o_.k;
      s.min_nodes = std::max(1, o_.k - 1);  // a loss re-forms with the survivors
      s.keep_alive_interval = o_.keep_alive;
      s.keep_alive_max_attempt = o_.keep_alive_attempts;
      // No "n/K nodes joined" line from every waiting member every 5 s: at 100,000 members
      // writing them took more of the shards' CPU than the protocol.
      s.progress_interval = s.join_timeout;
      s.store_host = o_.host;
      s.store_port = o_.port;
      rdzv::C10dNode self{"127.0.0.1", fmt::format("sim{}", m.id), false};
      m.rendezvous = std::make_unique<rdzv::C10dRendezvous>(executor, *m.counted, s, self);
      // The change log's wait: on the member's own watch connection, or on the link's waits
      // connection, where the link's members share one WAIT (counted like any other request).
      if (m.watch) {
        m.watched = std::make_unique<CountingStore>(*m.watch, m.counts);
        m.rendezvous->watch_changes_on(*m.watched);
      } else {
        m.rendezvous->watch_changes_on(*m.counted);
      }
    }
    alive_ = count;
  }

  void start() {
    const Clock::time_point now = Clock::now();
    for (auto& m : members_) {
      m->round_start = now;
      asio::co_spawn(io_, run_member(*m), [this, id = m->id](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& error) {
          say(fmt::format("error member {}: {}", id, error.what()));
        }
      });
    }
  }

  asio::awaitable<void> run_member(Member& m) {
    for (int round = 0;; ++round) {
      const WireCounts before = m.at_kill.value_or(m.counts);
      m.at_kill.reset();
      const rdzv::RendezvousInfo info = co_await m.rendezvous->next_round(1);
      placed(m, round, info, m.counts - before);
      co_await m.rendezvous->watch_round();  // never returns once the member is killed
      m.round_start = Clock::now();
    }
  }

  void placed(const Member& m, int round, const rdzv::RendezvousInfo& info,
              const WireCounts& counts) {
    Round& r = rounds_[round];
    r.start = std::min(r.start, m.round_start);
    r.last = Clock::now();
    ++r.placed;
    r.counts += counts;
    r.ranks.push_back(info.group_world_size == o_.k - round ? info.group_rank : -1);
    if (r.reported || r.placed < alive_) return;
    r.reported = true;
    std::string line = fmt::format("placed {} {} {} {} {} {} {}", round, ns(r.start), ns(r.last),
                                   r.placed, r.counts.requests, r.counts.request_bytes,
                                   r.counts.reply_bytes);
    for (int rank : r.ranks) (line += ' ') += std::to_string(rank);
    say(line);
  }

  asio::io_context& io_;
  ShardOptions o_;
  asio::posix::stream_descriptor input_;  // stdin: the driver's lines
  std::vector<std::unique_ptr<Member>> members_;
  std::vector<std::unique_ptr<SharedLink>> links_;
  std::vector<std::unique_ptr<LinkLease>> leases_;  // one per link, or per member
  std::map<int, Round> rounds_;
  int alive_ = 0;
  int connections_ = 0;
};

}  // namespace

int run_shard(const ShardOptions& options) {
  log::set_level("warn");  // one "round closed" line per member would swamp stderr
  asio::io_context io;
  Shard shard(io, options);
  int code = 0;
  asio::co_spawn(io, shard.run(), [&](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& error) {
      say(fmt::format("error shard: {}", error.what()));
      code = 1;
    }
    io.stop();
  });
  io.run();
  std::fflush(stdout);
  std::_Exit(code);  // 100,000 rendezvous objects need no orderly teardown
}

}  // namespace ddp::bench
