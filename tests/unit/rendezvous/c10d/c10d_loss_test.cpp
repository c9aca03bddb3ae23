// Node loss detected by a closed store connection (store leases), over a real TcpStoreServer: the
// host uses the in-process store, the others a client, a LeaseHolder on a client of its own and a
// third client for the change log's wait, as C10dBackend wires them. Heartbeats are slowed down so
// that only the connection can tell.

#include <catch2/catch.hpp>

#include <set>

#include "c10d_test_util.hpp"
#include "rendezvous/c10d/c10d_keys.hpp"
#include "rendezvous/store/key_table.hpp"
#include "rendezvous/store/store_roll_call.hpp"
#include "rendezvous/store_client/lease_holder.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

namespace {

struct TcpJob {
  explicit TcpJob(C10dSettings s) : settings(std::move(s)) {
    server.start();
    nodes.resize(3);
    nodes[0].rdzv = std::make_unique<C10dRendezvous>(io.get_executor(), server.store(), settings,
                                                     C10dNode{"127.0.0.1", "n0", true});
    for (std::size_t i = 1; i < 3; ++i) {
      Node& n = nodes[i];
      const std::string name = "n" + std::to_string(i);
      n.client = connect_client(io, server.port());
      n.lease_client = connect_client(io, server.port());
      n.holder = std::make_unique<LeaseHolder>(
          io.get_executor(), *n.lease_client,
          c10d_keys::full_lease_base(settings.run_id, name));
      n.watch_client = connect_client(io, server.port());
      n.rdzv = std::make_unique<C10dRendezvous>(io.get_executor(), *n.client, settings,
                                                C10dNode{"127.0.0.1", name, false});
      n.rdzv->watch_changes_on(*n.watch_client);
    }
  }

  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> next_round(std::vector<int> which) {
    std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> out;
    for (int i : which)
      out.push_back(spawn(io, nodes[static_cast<std::size_t>(i)].rdzv->next_round(1)));
    run_until(io, [&] { return all_done(out); });
    return out;
  }

  // The agent of node i is SIGKILLed: its sockets close, nothing else happens.
  void kill(std::size_t i) {
    Node& n = nodes[i];
    n.holder->stop();
    n.rdzv.reset();
    n.lease_client.reset();
    n.watch_client.reset();
    n.client.reset();
  }

  struct Node {
    std::unique_ptr<TcpStoreClient> client;
    std::unique_ptr<TcpStoreClient> lease_client;
    std::unique_ptr<TcpStoreClient> watch_client;
    std::unique_ptr<LeaseHolder> holder;
    std::unique_ptr<C10dRendezvous> rdzv;
  };

  asio::io_context io;
  TcpStoreServer server{io, "127.0.0.1", 0};
  C10dSettings settings;
  std::vector<Node> nodes;
};

C10dSettings slow_heartbeats() {
  C10dSettings s = fast_settings(2, 3);
  s.keep_alive_interval = 20s;  // a heartbeat verdict would take a minute
  s.last_call_timeout = 60s;    // re-forming must not wait for it
  s.connection_grace = 30ms;
  s.verdict_margin = 3s;  // an upper bound: the verdict returns as soon as it is known
  return s;
}

}  // namespace

TEST_CASE("a closed connection makes the verdict a loss and the survivors re-form at two",
          "[c10d][tcp][loss]") {
  TcpJob job(slow_heartbeats());
  for (const auto& o : job.next_round({2, 1, 0})) CHECK(o->get().group_world_size == 3);

  auto watch = spawn(job.io, job.nodes[0].rdzv->watch_round());
  job.kill(2);
  // Node 1's workers fail (their peer died): the verdict says the node was lost.
  auto verdict =
      spawn(job.io, job.nodes[1].rdzv->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(job.io, [&] { return verdict->done && watch->done; }));
  const auto loss = verdict->get();
  REQUIRE(loss.has_value());
  CHECK(loss->change == RoundChange::kNodeLost);
  REQUIRE(loss->lost.size() == 1);
  CHECK(loss->lost[0].node == "n2");
  CHECK(loss->lost[0].detected_by == "connection");
  CHECK(loss->lost[0].after >= 30ms);
  // A member whose workers did not fail learns it from its round watch.
  CHECK(watch->get().change == RoundChange::kNodeLost);
  CHECK(watch->get().lost.at(0).node == "n2");

  const auto next = job.next_round({0, 1});
  REQUIRE(all_done(next));  // well within the 60 s last call
  std::set<int> ranks;
  for (const auto& o : next) {
    CHECK(o->get().group_world_size == 2);
    CHECK(o->get().restart_count == 0);
    ranks.insert(o->get().group_rank);
  }
  CHECK(ranks == std::set<int>{0, 1});
}

TEST_CASE("a failure with every node alive has no loss verdict and spends a restart",
          "[c10d][tcp][loss]") {
  C10dSettings s = slow_heartbeats();
  s.verdict_margin = 50ms;
  TcpJob job(s);
  REQUIRE(all_done(job.next_round({0, 1, 2})));
  auto verdict =
      spawn(job.io, job.nodes[1].rdzv->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(job.io, [&] { return verdict->done; }));
  CHECK_FALSE(verdict->get().has_value());
  auto count = spawn(job.io, job.nodes[1].rdzv->report_failure("rank 1 exited with 3"));
  REQUIRE(run_until(job.io, [&] { return count->done; }));
  CHECK(count->get() == 1);
}

TEST_CASE("nodes that finished leave without being declared lost", "[c10d][tcp][loss]") {
  TcpJob job(slow_heartbeats());
  REQUIRE(all_done(job.next_round({0, 1, 2})));
  std::vector<std::shared_ptr<Outcome<Done>>> finished;
  for (auto& node : job.nodes) finished.push_back(spawn(job.io, node.rdzv->finish(true)));
  REQUIRE(run_until(job.io, [&] { return all_done(finished); }));
  job.kill(1);  // the agents exit
  job.kill(2);
  run_for(job.io, 200ms);  // several graces
  const Bytes* log = job.server.store().table().find("/ddprun/test/r0/change");
  REQUIRE(log != nullptr);
  CHECK(to_string(*log).find("lost") == std::string::npos);
}

TEST_CASE("a node alone in its round has no loss to wait for", "[c10d][loss]") {
  C10dSettings s = fast_settings(1, 1);
  s.verdict_margin = 60s;
  Cluster c(s);
  c.add_node(true);
  REQUIRE(all_done(c.next_round({0})));
  auto verdict = spawn(c.io, c.nodes[0]->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(c.io, [&] { return verdict->done; }, 5s));  // not the 60 s margin
  CHECK_FALSE(verdict->get().has_value());
}

namespace {

// The value of key (full name) on the job's store, or "" when it does not exist.
std::string roll_key_value(TcpJob& job, const std::string& key) {
  const Bytes* value = job.server.store().table().find(key);
  return value == nullptr ? std::string() : to_string(*value);
}

// Slow heartbeats, and a margin no verdict in these tests may wait out: a verdict that returns
// did so because the roll call or a loss ended it.
C10dSettings roll_call_settings(std::chrono::milliseconds grace) {
  C10dSettings s = slow_heartbeats();
  s.connection_grace = grace;
  s.verdict_margin = 60s;
  return s;
}

}  // namespace

TEST_CASE("a roll call ends the verdict once every lease holder answered", "[c10d][tcp][roll]") {
  C10dSettings s = roll_call_settings(30s);
  s.max_keys_per_request = 1;  // the ring reads and sets in chunks, here of one key
  TcpJob job(s);
  REQUIRE(all_done(job.next_round({0, 1, 2})));
  auto verdict =
      spawn(job.io, job.nodes[1].rdzv->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(job.io, [&] { return verdict->done; }, 20s));  // not the 60 s margin
  CHECK_FALSE(verdict->get().has_value());
  // Node 1 rang both lease holders (the host holds none); both answered generation 1, deleted
  // their bells and parked their waits again.
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll") == "1 n1");
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll/1") == "2");
  REQUIRE(run_until(job.io, [&] {
    return roll_key_value(job, "/ddprun/test/nodes/n1/lease.held").empty() &&
           roll_key_value(job, "/ddprun/test/nodes/n2/lease.held").empty() &&
           job.server.store().table().has_waiters("/ddprun/test/nodes/n1/lease.held") &&
           job.server.store().table().has_waiters("/ddprun/test/nodes/n2/lease.held");
  }));
  // Answering is no drop: no lease expired, no loss was logged.
  CHECK(roll_key_value(job, "/ddprun/test/r0/change").find("lost") == std::string::npos);

  // A later failure in the same round calls again: the first call's answers say nothing of it.
  auto again =
      spawn(job.io, job.nodes[0].rdzv->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(job.io, [&] { return again->done; }, 20s));
  CHECK_FALSE(again->get().has_value());
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll") == "2 n0");  // the store host calls too
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll/2") == "2");
}

TEST_CASE("a member whose lease holder died never answers: the verdict is its loss",
          "[c10d][tcp][roll]") {
  TcpJob job(roll_call_settings(1s));
  REQUIRE(all_done(job.next_round({0, 1, 2})));
  job.kill(2);
  auto verdict =
      spawn(job.io, job.nodes[1].rdzv->failure_verdict(std::chrono::steady_clock::now()));
  REQUIRE(run_until(job.io, [&] { return verdict->done; }, 20s));
  const auto loss = verdict->get();
  REQUIRE(loss.has_value());
  CHECK(loss->change == RoundChange::kNodeLost);
  REQUIRE(loss->lost.size() == 1);
  CHECK(loss->lost[0].node == "n2");
  CHECK(loss->lost[0].detected_by == "connection");
  // Node 1 answered; the dead node's bell stays rung, unanswered.
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll/1") == "1");
  CHECK(roll_key_value(job, "/ddprun/test/nodes/n2/lease.held") == "/ddprun/test/r0/roll");
}

TEST_CASE("failures on every node at once all end on the roll call", "[c10d][tcp][roll]") {
  TcpJob job(roll_call_settings(30s));
  REQUIRE(all_done(job.next_round({0, 1, 2})));
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Outcome<std::optional<RoundEvent>>>> verdicts;
  for (auto& node : job.nodes) verdicts.push_back(spawn(job.io, node.rdzv->failure_verdict(now)));
  REQUIRE(run_until(job.io, [&] { return all_done(verdicts); }, 20s));
  for (const auto& v : verdicts) CHECK_FALSE(v->get().has_value());
  // A caller that read the key after another's claim claims the next generation; a newer
  // generation moves every answer there, and each caller accepts it.
  const std::int64_t newest =
      roll_call_generation(to_bytes(roll_key_value(job, "/ddprun/test/r0/roll")));
  CHECK(newest >= 1);
  CHECK(newest <= 3);
  CHECK(roll_key_value(job, "/ddprun/test/r0/roll/" + std::to_string(newest)) == "2");
}
