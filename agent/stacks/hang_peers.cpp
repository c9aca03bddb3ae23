// HangPeers over the store. One lazily connected client per round. Its calls are awaited, not
// abandoned: when the agent's race ends for another reason, the race waits the few milliseconds
// a store call takes (at most kPeerStoreTimeout), and no call, connect included, is left in flight
// to outlive the agent; a client destroyed with the io_context would close its socket in a
// reactor that is already gone.

#include "agent/stacks/hang_peers.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::agent {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
constexpr auto kPeerStoreTimeout = std::chrono::seconds(5);

class StoreHangPeers final : public HangPeers,
                             public std::enable_shared_from_this<StoreHangPeers> {
 public:
  StoreHangPeers(std::string addr, std::uint16_t port, std::string key)
      : addr_(std::move(addr)), port_(port), key_(std::move(key)) {}

  asio::awaitable<void> publish(PeerWait wait) override {
    co_await guarded(raise(shared_from_this(), std::move(wait)));
  }

  asio::awaitable<std::optional<PeerWait>> read() override {
    co_return PeerWait::decode(co_await guarded(fetch(shared_from_this())));
  }

  void close() override {
    client_.reset();
    closed_ = true;
  }

 private:
  // The store calls are static coroutines that share ownership of the peers object.
  static asio::awaitable<std::string> raise(std::shared_ptr<StoreHangPeers> self, PeerWait wait) {
    rdzv::Store& store = *co_await self->client();
    const rdzv::Bytes mine = rdzv::to_bytes(wait.encode());
    rdzv::Bytes expected;  // empty: the key must be missing
    std::vector<std::string> keys{self->key_};
    const bool published = co_await store.check(keys);
    if (published) expected = co_await store.get(self->key_);
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (!expected.empty()) {
        const auto current = PeerWait::decode(rdzv::to_string(expected));
        if (current && current->seq >= wait.seq) break;
      }
      const rdzv::Bytes now = co_await store.compare_set(self->key_, expected, mine);
      if (now == mine) break;
      expected = now;
    }
    co_return std::string{};
  }

  static asio::awaitable<std::string> fetch(std::shared_ptr<StoreHangPeers> self) {
    rdzv::Store& store = *co_await self->client();
    std::vector<std::string> keys{self->key_};
    const bool published = co_await store.check(keys);
    if (!published) co_return std::string{};
    co_return rdzv::to_string(co_await store.get(self->key_));
  }

  static asio::awaitable<std::string> guarded(asio::awaitable<std::string> op) {
    try {
      co_return co_await std::move(op);
    } catch (const std::exception& e) {
      log::get("agent")->debug("hang detector: store call failed: {}", e.what());
    }
    co_return std::string{};
  }

  asio::awaitable<rdzv::Store*> client() {
    if (closed_) throw IoError("the agent is closing");
    if (!client_) {
      rdzv::ConnectOptions options;
      options.connect_timeout = kPeerStoreTimeout;
      options.call_timeout = kPeerStoreTimeout;
      client_ = co_await rdzv::TcpStoreClient::connect(addr_, port_, options);
      client_->set_timeout(kPeerStoreTimeout);
    }
    co_return client_.get();
  }

  std::string addr_;
  std::uint16_t port_;
  std::string key_;
  std::unique_ptr<rdzv::TcpStoreClient> client_;
  bool closed_ = false;
};

}  // namespace

// Field for field; a field another build left out reads as its default.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(PeerWait, seq, op, ranks, node, waited_s)

std::string PeerWait::encode() const {
  json doc = *this;
  doc["version"] = 1;
  return doc.dump();
}

std::optional<PeerWait> PeerWait::decode(const std::string& text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("seq")) return std::nullopt;
  try {
    return doc.get<PeerWait>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::shared_ptr<HangPeers> make_store_hang_peers(std::string addr, std::uint16_t port,
                                                 std::string run_id, int round) {
  return std::make_shared<StoreHangPeers>(std::move(addr), port,
                                          fmt::format("/ddprun/{}/hang/{}/wait", run_id, round));
}

}  // namespace ddp::agent
