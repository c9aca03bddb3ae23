// Collectives over shared memory (ranks are threads of this process): tensors spanning several
// slots, the exact summation order, reduce_scatter, broadcast and all_gather mixed with
// all_reduce across slot boundaries, the set-up's refusal of a peer on another host, and no names
// left in /dev/shm.
#include "collectives/shm/shm_collectives.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "collectives/shm/peer_flags.hpp"
#include "ddp/error.hpp"
#include "rank_threads.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

using namespace ddp;
using namespace ddp::coll;
using ddp::coll::test::run_ranks;
using ddp::coll::test::tensor_of;

namespace {

constexpr auto kShm = AllreduceAlgorithm::kShm;
const std::size_t kFloatsPerSlot = shm::ShmCollectives::kSlotBytes / sizeof(float);

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

int shm_names_of_this_process() {
  const std::string prefix = "ddp-" + std::to_string(::getpid()) + "-";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("shm all_reduce over several slots sums in rank order, bitwise equal on every rank",
          "[shm]") {
  const std::size_t n = 2 * kFloatsPerSlot + kFloatsPerSlot / 2 + 7;  // three chunks, odd tail
  std::vector<std::vector<float>> inputs;
  for (unsigned r = 0; r < 3; ++r) inputs.push_back(random_floats(n, r + 1));
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) expected[i] = (inputs[0][i] + inputs[1][i]) + inputs[2][i];

  std::vector<int> exact(3, 0);
  run_ranks(
      3,
      [&](GlooProcessGroup& g) {
        REQUIRE(g.algorithm() == kShm);
        std::vector<float> v = inputs[g.rank()];
        for (int round = 0; round < 3; ++round) {  // the slots alternate across operations too
          v = inputs[g.rank()];
          g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
        }
        exact[g.rank()] = v == expected;
      },
      std::chrono::seconds(20), kShm);
  CHECK(exact == std::vector<int>{1, 1, 1});
}

TEST_CASE("shm all_reduce kAvg divides each share in the reducing pass, as divide_by_count does",
          "[shm]") {
  // Several slots and an odd tail, so shares end inside a block and chunks alternate slots.
  const std::size_t n = kFloatsPerSlot + kFloatsPerSlot / 3 + 11;
  std::vector<std::vector<float>> inputs;
  for (unsigned r = 0; r < 3; ++r) inputs.push_back(random_floats(n, r + 7));
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) expected[i] = ((inputs[0][i] + inputs[1][i]) + inputs[2][i]);
  divide_by_count(tensor_of(expected, DType::kFloat32), 3);

  std::vector<int> exact(3, 0);
  std::vector<int> truncated(3, 0);
  run_ranks(
      3,
      [&](GlooProcessGroup& g) {
        std::vector<float> v = inputs[g.rank()];
        g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kAvg)->wait();
        exact[g.rank()] = v == expected;
        std::vector<std::int64_t> whole(5, g.rank() + 1);  // (1 + 2 + 3) / 3 = 2, 7 / 3 = 2
        whole[4] = g.rank() == 0 ? 2 : whole[4];
        g.all_reduce(tensor_of(whole, DType::kInt64), ReduceOp::kAvg)->wait();
        truncated[g.rank()] = whole == std::vector<std::int64_t>{2, 2, 2, 2, 2};
      },
      std::chrono::seconds(20), kShm);
  CHECK(exact == std::vector<int>{1, 1, 1});
  CHECK(truncated == std::vector<int>{1, 1, 1});
}

TEST_CASE("shm all_reduce with more ranks than elements, and queued operations", "[shm]") {
  run_ranks(
      4,
      [](GlooProcessGroup& g) {
        std::vector<std::int64_t> one{g.rank() + 1};
        std::vector<std::uint8_t> bytes(3, static_cast<std::uint8_t>(g.rank()));
        auto w1 = g.all_reduce(tensor_of(one, DType::kInt64), ReduceOp::kSum);
        auto w2 = g.all_reduce(tensor_of(bytes, DType::kUInt8), ReduceOp::kMax);
        w2->wait();
        w1->wait();
        CHECK(one == std::vector<std::int64_t>{10});
        CHECK(bytes == std::vector<std::uint8_t>(3, 3));
      },
      std::chrono::seconds(20), kShm);
}

TEST_CASE("shm reduce_scatter gives each rank its reduced slice", "[shm]") {
  run_ranks(
      2,
      [](GlooProcessGroup& g) {
        std::vector<double> in{1, 2, 3, 4}, out(2);
        for (auto& x : in) x *= g.rank() + 1;
        g.reduce_scatter(tensor_of(in, DType::kFloat64), tensor_of(out, DType::kFloat64),
                         ReduceOp::kAvg)
            ->wait();
        CHECK(out == (g.rank() == 0 ? std::vector<double>{1.5, 3} : std::vector<double>{4.5, 6}));
      },
      std::chrono::seconds(20), kShm);
}

TEST_CASE("shm broadcast and all_gather over several slots, between all_reduces", "[shm]") {
  const std::size_t n = kFloatsPerSlot + kFloatsPerSlot / 3 + 5;  // two chunks, odd tail
  run_ranks(
      3,
      [&](GlooProcessGroup& g) {
        const int r = g.rank();
        for (int round = 0; round < 2; ++round) {  // odd chunk counts shift the slot parity
          std::vector<float> b(n, static_cast<float>(r));
          for (std::size_t i = 0; i < n; i += 997) b[i] = static_cast<float>(i + r);
          g.broadcast(tensor_of(b, DType::kFloat32), 1)->wait();
          bool same = true;
          for (std::size_t i = 0; i < n; ++i) {
            same = same && b[i] == (i % 997 == 0 ? static_cast<float>(i + 1) : 1.0f);
          }
          CHECK(same);

          std::vector<std::int32_t> in(n), out(3 * n);
          for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(r * 1000000 + i);
          g.all_gather(tensor_of(in, DType::kInt32), tensor_of(out, DType::kInt32))->wait();
          bool gathered = true;
          for (std::size_t i = 0; i < out.size(); ++i) {
            gathered = gathered && out[i] == static_cast<std::int32_t>((i / n) * 1000000 + i % n);
          }
          CHECK(gathered);

          std::vector<double> sum{static_cast<double>(r)};
          g.all_reduce(tensor_of(sum, DType::kFloat64), ReduceOp::kSum)->wait();
          CHECK(sum[0] == 3.0);
          g.barrier()->wait();
        }
      },
      std::chrono::seconds(20), kShm);
}

TEST_CASE("shm set-up leaves no names in /dev/shm", "[shm]") {
  run_ranks(
      3,
      [](GlooProcessGroup& g) {
        std::vector<float> v{1.0f};
        g.all_reduce(tensor_of(v, DType::kFloat32), ReduceOp::kSum)->wait();
        g.barrier()->wait();  // every rank has finished its set-up
        CHECK(shm_names_of_this_process() == 0);
      },
      std::chrono::seconds(20), kShm);
}

TEST_CASE("shm set-up refuses a peer from another host, on every rank", "[shm]") {
  auto store = std::shared_ptr<rdzv::BlockingStore>(rdzv::BlockingStore::in_memory());
  // Rank 1 is played by hand: it says it lives elsewhere and that it mapped everything.
  const std::string elsewhere = "another-boot-id/mnt:[1]/net:[2]\n/ddp-elsewhere";
  store->set("segment/1", rdzv::Bytes(elsewhere.begin(), elsewhere.end()));
  store->set("mapped/1", rdzv::Bytes{'o', 'k'});
  shm::ShmCollectives::Refusal refusal;
  auto transport = shm::ShmCollectives::connect(*store, 0, 2, {0, 1}, std::chrono::seconds(5),
                                                refusal, shm::shared_memory_domain());
  CHECK(transport == nullptr);
  CHECK(refusal.elsewhere);
  CHECK(refusal.domains ==
        std::vector<std::string>{shm::shared_memory_domain(), "another-boot-id/mnt:[1]/net:[2]"});
  CHECK_THAT(refusal.reason, Catch::Contains("ranks 0 and 1 are not on one host"));
  const auto answer = store->get("mapped/0", std::chrono::seconds(1));
  CHECK(std::string(answer.begin(), answer.end()) != "ok");  // rank 1 would give up too
  CHECK(shm_names_of_this_process() == 0);
}

TEST_CASE("shm set-up quotes the reason a peer has no segment", "[shm]") {
  auto store = std::shared_ptr<rdzv::BlockingStore>(rdzv::BlockingStore::in_memory());
  // Rank 1 is played by hand: its segment could not be made (a full /dev/shm, say).
  const std::string failed = shm::shared_memory_domain() +
                             "\n\nrank 1: shared memory reserve 9 bytes for /ddp-x: No space left "
                             "on device (is /dev/shm too small?)";
  store->set("segment/1", rdzv::Bytes(failed.begin(), failed.end()));
  const std::string answer = "rank 1: no segment";
  store->set("mapped/1", rdzv::Bytes(answer.begin(), answer.end()));
  shm::ShmCollectives::Refusal refusal;
  auto transport = shm::ShmCollectives::connect(*store, 0, 2, {0, 1}, std::chrono::seconds(5),
                                                refusal, shm::shared_memory_domain());
  CHECK(transport == nullptr);
  CHECK_FALSE(refusal.elsewhere);
  CHECK_THAT(refusal.reason, Catch::Contains("rank 1: shared memory reserve") &&
                                 Catch::Contains("is /dev/shm too small?"));
  CHECK(shm_names_of_this_process() == 0);
}

TEST_CASE("a barrier ends when the peer has exited, even before anyone reaps it", "[shm]") {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  // Not reaped: a zombie, which still takes kill(pid, 0).
  shm::PeerFlags peer;
  peer.pid = static_cast<std::int32_t>(child);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const std::atomic<bool> not_aborted{false};
  CHECK_THROWS_MATCHES(shm::await(peer, 1, deadline, 2, not_aborted), std::runtime_error,
                       Catch::Matchers::Message(fmt::format("rank 2 (pid {}) exited", child)));
  CHECK(std::chrono::steady_clock::now() < deadline);
  int status = 0;
  CHECK(::waitpid(child, &status, 0) == child);
}

TEST_CASE("a barrier past its deadline throws TimeoutError naming the rank", "[shm]") {
  shm::PeerFlags peer;
  peer.pid = static_cast<std::int32_t>(::getpid());  // alive: only the deadline can end the wait
  const std::atomic<bool> not_aborted{false};
  CHECK_THROWS_MATCHES(shm::await(peer, 1, std::chrono::steady_clock::now(), 3, not_aborted),
                       TimeoutError, Catch::Matchers::Message("timed out waiting for rank 3"));
}

TEST_CASE("an aborted barrier throws long before its deadline", "[shm][abort]") {
  shm::PeerFlags peer;
  peer.pid = static_cast<std::int32_t>(::getpid());  // alive, never announces
  const std::atomic<bool> aborted{true};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  CHECK_THROWS_MATCHES(shm::await(peer, 1, deadline, 4, aborted), std::runtime_error,
                       Catch::Matchers::Message("aborted while waiting for rank 4"));
  CHECK(std::chrono::steady_clock::now() < deadline);
}
