// The hosted store runs on a private io_context and thread, never on the caller's: ranks block on
// the store during init while the server must keep answering. It lives until exit (other ranks
// may still be finishing their last store calls when rank 0's main returns).
#include "runtime/src/hosted_store.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <memory>
#include <thread>

#include "common/log.hpp"
#include "rendezvous/store_server/tcp_store_server.hpp"

namespace ddp::runtime {
namespace {

struct HostedStore {
  explicit HostedStore(int port)
      : server(io, "0.0.0.0", static_cast<std::uint16_t>(port)),
        guard(io.get_executor()) {
    server.start();
    thread = std::thread([this] { io.run(); });
  }
  ~HostedStore() {
    io.stop();
    thread.join();
  }
  boost::asio::io_context io;
  rdzv::TcpStoreServer server;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard;
  std::thread thread;
};

}  // namespace

bool must_host_store(int rank) {
  const char* value = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return rank == 0 && (value == nullptr || std::string(value) != "True");
}

void host_store(int port) {
  static std::unique_ptr<HostedStore> hosted;
  if (hosted != nullptr) return;
  hosted = std::make_unique<HostedStore>(port);
  log::get("worker")->debug("rank 0 hosts the store port={}", port);
}

}  // namespace ddp::runtime
