#pragma once
// A cluster of C10dRendezvous nodes on one io_context over one MemoryStore, and helpers that run
// coroutines on that loop until they finish (bounded: a hang fails the test, never blocks it).

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rendezvous/c10d/c10d_rendezvous.hpp"
#include "rendezvous/store/memory_store.hpp"
#include "rendezvous/store_client/tcp_store_client.hpp"

namespace ddp::rdzv::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

template <class T>
struct Outcome {
  bool done = false;
  std::optional<T> value;
  std::exception_ptr error;

  // The value; rethrows the coroutine's exception.
  T get() const {
    if (error) std::rethrow_exception(error);
    return *value;
  }
  // The exception's message ("" when it succeeded).
  std::string error_text() const {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
};

struct Done {};

template <class T>
std::shared_ptr<Outcome<T>> spawn(asio::io_context& io, asio::awaitable<T> task) {
  auto out = std::make_shared<Outcome<T>>();
  asio::co_spawn(io, std::move(task), [out](std::exception_ptr e, T value) {
    out->done = true;
    out->error = e;
    if (!e) out->value = std::move(value);
  });
  return out;
}

inline std::shared_ptr<Outcome<Done>> spawn(asio::io_context& io, asio::awaitable<void> task) {
  auto wrapped = [](asio::awaitable<void> t) -> asio::awaitable<Done> {
    co_await std::move(t);
    co_return Done{};
  };
  return spawn(io, wrapped(std::move(task)));
}

// Runs the loop until pred() holds or `budget` passes; returns pred().
inline bool run_until(asio::io_context& io, const std::function<bool()>& pred,
                      std::chrono::milliseconds budget = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (!pred() && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  return pred();
}

// Runs the loop for `duration` (for checks that something did *not* happen meanwhile).
inline void run_for(asio::io_context& io, std::chrono::milliseconds duration) {
  asio::steady_timer after(io, duration);
  bool waited = false;
  after.async_wait([&](boost::system::error_code) { waited = true; });
  run_until(io, [&] { return waited; }, duration + 5s);
}

// A client of the store at 127.0.0.1:port with 5 s timeouts (a failed connect fails the test).
inline std::unique_ptr<TcpStoreClient> connect_client(asio::io_context& io, std::uint16_t port) {
  ConnectOptions options;
  options.connect_timeout = 5s;
  options.call_timeout = 5s;
  auto out = spawn(io, TcpStoreClient::connect("127.0.0.1", port, options));
  if (!run_until(io, [&] { return out->done; })) throw std::runtime_error("connect hung");
  if (out->error) std::rethrow_exception(out->error);
  auto client = std::move(*out->value);
  client->set_timeout(5s);
  return client;
}

template <class Range>
bool all_done(const Range& outcomes) {
  for (const auto& o : outcomes) {
    if (!o->done) return false;
  }
  return true;
}

// Short timeouts so that every scenario runs in well under a second.
inline C10dSettings fast_settings(int min_nodes, int max_nodes) {
  C10dSettings s;
  s.run_id = "test";
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.join_timeout = 5s;
  s.last_call_timeout = 100ms;
  s.close_timeout = 2s;
  s.keep_alive_interval = 40ms;
  s.keep_alive_max_attempt = 3;
  s.progress_interval = 50ms;
  s.store_host = "store";
  s.store_port = 29400;
  return s;
}

// Counts the calls that reach a store (a stand-in for its requests; a parked wait is one).
class CallCounter final : public Store {
 public:
  explicit CallCounter(Store& inner) : inner_(inner) {}
  std::int64_t calls = 0;

  asio::awaitable<void> set(std::string k, Bytes v) override {
    ++calls;
    return inner_.set(std::move(k), std::move(v));
  }
  asio::awaitable<Bytes> get(std::string k) override {
    ++calls;
    return inner_.get(std::move(k));
  }
  asio::awaitable<std::int64_t> add(std::string k, std::int64_t d) override {
    ++calls;
    return inner_.add(std::move(k), d);
  }
  asio::awaitable<Bytes> compare_set(std::string k, Bytes e, Bytes d) override {
    ++calls;
    return inner_.compare_set(std::move(k), std::move(e), std::move(d));
  }
  asio::awaitable<bool> check(std::vector<std::string> k) override {
    ++calls;
    return inner_.check(std::move(k));
  }
  using Store::wait;
  asio::awaitable<void> wait(std::vector<std::string> k, std::chrono::milliseconds t) override {
    ++calls;
    return inner_.wait(std::move(k), t);
  }
  asio::awaitable<bool> wait_for(std::vector<std::string> k,
                                 std::chrono::milliseconds t) override {
    ++calls;
    return inner_.wait_for(std::move(k), t);
  }
  asio::awaitable<std::int64_t> num_keys() override {
    ++calls;
    return inner_.num_keys();
  }
  asio::awaitable<bool> delete_key(std::string k) override {
    ++calls;
    return inner_.delete_key(std::move(k));
  }
  asio::awaitable<void> append(std::string k, Bytes v) override {
    ++calls;
    return inner_.append(std::move(k), std::move(v));
  }
  asio::awaitable<std::vector<Bytes>> multi_get(std::vector<std::string> k) override {
    ++calls;
    return inner_.multi_get(std::move(k));
  }
  asio::awaitable<void> multi_set(std::vector<std::pair<std::string, Bytes>> kvs) override {
    ++calls;
    return inner_.multi_set(std::move(kvs));
  }
  asio::awaitable<std::vector<Bytes>> multi_get_existing(std::vector<std::string> k) override {
    ++calls;
    return inner_.multi_get_existing(std::move(k));
  }

 private:
  Store& inner_;
};


struct Cluster {
  explicit Cluster(C10dSettings s) : settings(std::move(s)) {}

  // Adds node "n<i>" (address 10.0.0.<i>); a host opens worker store 10.0.0.<i>:<1000+round>.
  C10dRendezvous& add_node(bool host = false) {
    const int i = static_cast<int>(nodes.size());
    C10dNode self{"10.0.0." + std::to_string(i), "n" + std::to_string(i), host};
    WorkerStoreOpener opener;
    if (host) {
      opener = [addr = self.addr](int round) {
        return std::make_pair(addr, static_cast<std::uint16_t>(1000 + round));
      };
    }
    nodes.push_back(std::make_unique<C10dRendezvous>(io.get_executor(), store, settings, self,
                                                     opener));
    return *nodes.back();
  }

  // Every listed node enters next_round(local_world_size); runs until all return.
  std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> next_round(std::vector<int> which,
                                                                     int local_world_size = 1) {
    std::vector<std::shared_ptr<Outcome<RendezvousInfo>>> out;
    for (int i : which) out.push_back(spawn(io, nodes[i]->next_round(local_world_size)));
    run_until(io, [&] { return all_done(out); });
    return out;
  }

  asio::io_context io;
  MemoryStore store{io.get_executor()};
  C10dSettings settings;
  std::vector<std::unique_ptr<C10dRendezvous>> nodes;
};

}  // namespace ddp::rdzv::test
