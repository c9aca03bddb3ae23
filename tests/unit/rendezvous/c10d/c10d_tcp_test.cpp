// The c10d protocol over real sockets: a TcpStoreServer on port 0, the host using its in-process
// store and the other nodes TcpStoreClients, all on one io_context.

#include <catch2/catch.hpp>

#include <set>

#include "c10d_test_util.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

using namespace ddp::rdzv;
using namespace ddp::rdzv::test;

TEST_CASE("four nodes over TCP get ranks 0..3 and lose the store host cleanly", "[c10d][tcp]") {
  asio::io_context io;
  TcpStoreServer server(io, "127.0.0.1", 0);
  server.start();
  C10dSettings s = fast_settings(4, 4);
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  std::vector<std::unique_ptr<C10dRendezvous>> nodes;
  nodes.push_back(std::make_unique<C10dRendezvous>(io.get_executor(), server.store(), s,
                                                   C10dNode{"127.0.0.1", "host", true}));
  for (int i = 1; i < 4; ++i) {
    clients.push_back(connect_client(io, server.port()));
    nodes.push_back(std::make_unique<C10dRendezvous>(
        io.get_executor(), *clients.back(), s,
        C10dNode{"127.0.0.1", "n" + std::to_string(i), false}));
  }
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> out;
  for (int i = 3; i >= 0; --i) {
    out.push_back(spawn(io, nodes[static_cast<std::size_t>(i)]->next_round(2)));
  }
  REQUIRE(run_until(io, [&] { return all_done(out); }));
  std::set<int> ranks;
  for (const auto& o : out) ranks.insert(o->get().group_rank);
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(out.back()->get().group_rank == 0);  // the host
  CHECK(out.front()->get().world_size == 8);

  // The store host dies: every client's watch ends with an error, none hangs.
  std::vector<std::shared_ptr<Outcome<RoundEvent>>> watches;
  for (std::size_t i = 1; i < 4; ++i) watches.push_back(spawn(io, nodes[i]->watch_round()));
  server.stop();
  REQUIRE(run_until(io, [&] { return all_done(watches); }));
  for (const auto& w : watches) CHECK(w->error);
}

TEST_CASE("a round of more nodes than the store takes keys in one request still closes",
          "[c10d][tcp]") {
  // The closer reads every descriptor and writes every place: at 100,000 nodes one request each
  // would pass the store's 65,536-key limit. Here the limit is 3 keys and the round 5 nodes.
  asio::io_context io;
  StoreLimits limits;
  limits.max_keys_per_query = 3;
  TcpStoreServer server(io, "127.0.0.1", 0, limits);
  server.start();
  C10dSettings s = fast_settings(5, 5);
  s.max_keys_per_request = 3;
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  std::vector<std::unique_ptr<C10dRendezvous>> nodes;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(connect_client(io, server.port()));
    nodes.push_back(std::make_unique<C10dRendezvous>(
        io.get_executor(), *clients.back(), s,
        C10dNode{"127.0.0.1", "n" + std::to_string(i), false}));
  }
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> out;
  for (auto& node : nodes) out.push_back(spawn(io, node->next_round(1)));
  REQUIRE(run_until(io, [&] { return all_done(out); }));
  std::set<int> ranks;
  for (const auto& o : out) ranks.insert(o->get().group_rank);
  CHECK(ranks == std::set<int>{0, 1, 2, 3, 4});
}
