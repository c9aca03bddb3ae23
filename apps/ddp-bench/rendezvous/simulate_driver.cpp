// The driver's phases, in order: store, shards ready, "go" until every member is placed, a settle
// of one keep-alive interval, two snapshots a window apart (requests and the store's CPU), then
// "kill" one member (its connections close, as a SIGKILLed agent's do) and wait until every
// survivor is placed in the next round. Places are
// checked: every group rank of a round exactly once.

#include "apps/ddp-bench/rendezvous/simulate_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "apps/ddp-bench/rendezvous/child_process.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_server/server_os.hpp"

namespace ddp::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(std::int64_t from_ns, std::int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e9;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch()).count();
}

struct Placed {  // one shard's "placed" line
  std::int64_t start_ns = 0;
  std::int64_t last_ns = 0;
  int members = 0;
  WireCounts counts;
  std::vector<int> ranks;
};

class Driver {
 public:
  Driver(const SimulateOptions& o, std::string self) : o_(o), self_(std::move(self)) {}

  SimulateReport run() {
    SimulateReport r;
    r.k = o_.k;
    // Three connections per member, or per link of members: the store takes about 18,000.
    r.per_connection = o_.per_connection > 0 ? o_.per_connection
                                             : std::max(1, (3 * o_.k + 17999) / 18000);
    const int connections = 3 * ((o_.k + r.per_connection - 1) / r.per_connection);
    r.procs = o_.procs > 0 ? o_.procs : std::max(1, (connections + 14999) / 15000);
    r.keep_alive_s = std::chrono::duration<double>(o_.keep_alive).count();
    r.keep_alive_attempts = o_.keep_alive_attempts;
    start_store();
    start_shards(r);
    for (auto& shard : shards_) r.connections += std::stoi(expect(*shard, "ready", "connect"));

    // Formation: every member joins at "go".
    const auto cpu_before = store_cpu();
    members_cpu_before_ = members_cpu();
    for (auto& shard : shards_) shard->send("go");
    const auto first = collect(0, o_.k, "the first round");
    r.formed_s = seconds_between(first.start_ns, first.last_ns);
    r.round = cost(first, cpu_before);

    // What follows reports what it measured before a phase fails (a member declared lost
    // before the bench silenced one: heartbeats fell behind).
    try {
      measure_heartbeats(r);
      measure_loss(r);
    } catch (const Error& e) {
      r.error = e.what();
    }
    for (auto& shard : shards_) shard->send("quit");
    for (auto& shard : shards_) shard->stop(std::chrono::seconds(5));
    if (store_process_) store_process_->stop(std::chrono::seconds(5));
    return r;
  }

 private:
  void measure_heartbeats(SimulateReport& r) {
    // One interval to settle, then a window.
    std::this_thread::sleep_for(o_.keep_alive);
    const auto window = o_.window.count() > 0 ? o_.window : 2 * o_.keep_alive;
    const auto [counts0, cpu0, t0] = snapshot();
    std::this_thread::sleep_for(window);
    const auto [counts1, cpu1, t1] = snapshot();
    r.heartbeat_window_s = seconds_between(t0, t1);
    r.heartbeat_requests_per_s =
        static_cast<double>(counts1.requests - counts0.requests) / r.heartbeat_window_s;
    r.heartbeat_request_bytes_per_s =
        static_cast<double>(counts1.request_bytes - counts0.request_bytes) / r.heartbeat_window_s;
    if (cpu0 && cpu1) r.heartbeat_store_cpu = (*cpu1 - *cpu0) / r.heartbeat_window_s;
  }

  void measure_loss(SimulateReport& r) {
    // Shard 0's first member dies; every shard counts its members' requests from here.
    const auto cpu_loss = store_cpu();
    members_cpu_before_ = members_cpu();
    for (std::size_t i = 1; i < shards_.size(); ++i) shards_[i]->send("mark");
    shards_.front()->send("kill");
    const std::int64_t killed = std::stoll(expect(*shards_.front(), "killed", "kill"));
    const auto next = collect(1, o_.k - 1, "the round after the loss");
    r.loss_detected_s = seconds_between(killed, next.start_ns);
    r.loss_reformed_s = seconds_between(killed, next.last_ns);
    r.loss_round = cost(next, cpu_loss);
  }

  void start_store() {
    if (!o_.store.empty()) {
      const auto colon = o_.store.rfind(':');
      host_ = o_.store.substr(0, colon);
      port_ = static_cast<std::uint16_t>(std::stoi(o_.store.substr(colon + 1)));
      // "pid 1234 (ddp-store)" when /proc tells who listens there: its CPU is then measured.
      const std::string owner = rdzv::describe_port_owner(port_);
      if (owner.rfind("pid ", 0) == 0) store_pid_ = std::stoi(owner.substr(4));
      return;
    }
    const auto bin = std::filesystem::path(self_).parent_path();
    store_process_ = std::make_unique<ChildProcess>(std::vector<std::string>{
        (bin / "ddp-store").string(), "serve", "--host", "127.0.0.1", "--port", "0"});
    const auto line = store_process_->read_line(Clock::now() + std::chrono::seconds(30));
    const std::string prefix = "listening on ";
    if (!line || line->rfind(prefix, 0) != 0) {
      throw Error("ddp-bench rendezvous: ddp-store serve did not say where it listens");
    }
    const std::string where = line->substr(prefix.size());
    host_ = where.substr(0, where.rfind(':'));
    port_ = static_cast<std::uint16_t>(std::stoi(where.substr(where.rfind(':') + 1)));
    store_pid_ = store_process_->pid();
  }

  void start_shards(const SimulateReport& r) {
    for (int i = 0; i < r.procs; ++i) {
      const int first = static_cast<int>(static_cast<std::int64_t>(o_.k) * i / r.procs);
      const int last = static_cast<int>(static_cast<std::int64_t>(o_.k) * (i + 1) / r.procs);
      shards_.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
          self_, "--shard", fmt::format("{}:{}", first, last), "--simulate",
          std::to_string(o_.k), "--store", fmt::format("{}:{}", host_, port_),
          "--per-connection", std::to_string(r.per_connection), "--keep-alive-ms",
          std::to_string(o_.keep_alive.count()), "--keep-alive-attempts",
          std::to_string(o_.keep_alive_attempts)}));
    }
  }

  // The rest of the next line of `shard`, which must start with `word`.
  std::string expect(ChildProcess& shard, const std::string& word, const std::string& phase) {
    const auto line = shard.read_line(Clock::now() + o_.phase_timeout);
    if (!line) {
      throw Error(fmt::format("ddp-bench rendezvous: shard pid {} said nothing within {} s ({})",
                              shard.pid(), o_.phase_timeout.count(), phase));
    }
    if (line->rfind(word + " ", 0) != 0) {
      throw Error(fmt::format("ddp-bench rendezvous: shard pid {} ({}): {}", shard.pid(), phase,
                              *line));
    }
    return line->substr(word.size() + 1);
  }

  // Every shard's "placed <round>" line, merged; checks that the `size` places are distinct.
  Placed collect(int round, int size, const std::string& phase) {
    Placed all;
    all.start_ns = INT64_MAX;
    std::vector<char> seen(static_cast<std::size_t>(size), 0);
    for (auto& shard : shards_) {
      std::istringstream in(expect(*shard, "placed", phase));
      int got_round = 0;
      Placed p;
      in >> got_round >> p.start_ns >> p.last_ns >> p.members >> p.counts.requests >>
          p.counts.request_bytes >> p.counts.reply_bytes;
      if (got_round != round) {
        throw Error(fmt::format("ddp-bench rendezvous: shard pid {} placed its members in round "
                                "{} while {} was expected (a member was lost unasked?)",
                                shard->pid(), got_round, round));
      }
      for (int rank = 0; in >> rank;) {
        if (rank < 0 || rank >= size || seen[static_cast<std::size_t>(rank)]++) {
          throw Error(fmt::format("ddp-bench rendezvous: {}: group rank {} is out of 0..{} or "
                                  "given twice", phase, rank, size - 1));
        }
      }
      all.start_ns = std::min(all.start_ns, p.start_ns);
      all.last_ns = std::max(all.last_ns, p.last_ns);
      all.members += p.members;
      all.counts += p.counts;
    }
    if (all.members != size) {
      throw Error(fmt::format("ddp-bench rendezvous: {}: {} members placed, {} expected", phase,
                              all.members, size));
    }
    return all;
  }

  PhaseCost cost(const Placed& placed, const std::optional<double>& cpu_before) {
    PhaseCost c;
    c.members = placed.members;
    c.counts = placed.counts;
    const auto cpu_after = store_cpu();
    if (cpu_before && cpu_after) c.store_cpu_s = *cpu_after - *cpu_before;
    c.members_cpu_s = members_cpu() - members_cpu_before_;
    return c;
  }

  std::tuple<WireCounts, std::optional<double>, std::int64_t> snapshot() {
    WireCounts total;
    for (auto& shard : shards_) shard->send("snap");
    const auto cpu = store_cpu();
    const std::int64_t at = now_ns();
    for (auto& shard : shards_) {
      std::istringstream in(expect(*shard, "snap", "heartbeat snapshot"));
      WireCounts c;
      in >> c.requests >> c.request_bytes >> c.reply_bytes;
      total += c;
    }
    return {total, cpu, at};
  }

  double members_cpu() const {
    double total = 0;
    for (const auto& shard : shards_) total += process_cpu_seconds(shard->pid()).value_or(0);
    return total;
  }

  std::optional<double> store_cpu() const {
    if (store_pid_ <= 0) return std::nullopt;
    return process_cpu_seconds(store_pid_);
  }

  SimulateOptions o_;
  std::string self_;
  std::string host_;
  std::uint16_t port_ = 0;
  pid_t store_pid_ = -1;
  std::unique_ptr<ChildProcess> store_process_;
  std::vector<std::unique_ptr<ChildProcess>> shards_;
  double members_cpu_before_ = 0;  // at the start of the phase cost() ends
};

}  // namespace

SimulateReport run_simulation(const SimulateOptions& options, const std::string& self) {
  return Driver(options, self).run();
}

}  // namespace ddp::bench
