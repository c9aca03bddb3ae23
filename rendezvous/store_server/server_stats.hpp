#pragma once
// ServerStats: what the TCPStore servers of this process have done (connections, requests by
// command, bytes) and the key tables they serve, for the metrics endpoint (store_metrics.hpp).
// One per process, shared by every server in it (an agent may host a rendezvous store and a
// worker store per round): counters only grow across servers coming and going. The counters are
// atomics (relaxed); the table list is read on the thread that runs the servers.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "rendezvous/wire/protocol.hpp"

namespace ddp::rdzv {

class KeyTable;

inline constexpr std::size_t kCommandCount = static_cast<std::size_t>(wire::Command::kBarrier) + 1;

// The label a command is exported under ("set", "compare_set", "multi_get", ...).
const char* command_label(wire::Command command);

struct ServerStats {
  std::atomic<std::uint64_t> connections_accepted{0};
  std::atomic<std::uint64_t> connections_closed{0};
  std::atomic<std::uint64_t> connections_refused{0};  // over StoreLimits::max_connections
  // The store's guard (store_guard.hpp, docs/security.md): connections that proved the job
  // secret, and those refused: at accept (not a member), for a bad HELLO or a wrong tag, for a
  // request without authentication, for no handshake within the deadline.
  std::atomic<std::uint64_t> connections_authenticated{0};
  std::atomic<std::uint64_t> refused_not_member{0};
  std::atomic<std::uint64_t> handshakes_refused{0};
  std::atomic<std::uint64_t> requests_unauthenticated{0};
  std::atomic<std::uint64_t> handshakes_timed_out{0};
  std::array<std::atomic<std::uint64_t>, kCommandCount> requests{};
  std::atomic<std::uint64_t> bad_requests{0};  // input that closed its connection
  std::atomic<std::uint64_t> bytes_received{0};
  std::atomic<std::uint64_t> bytes_sent{0};

  void count_request(wire::Command command) {
    requests[static_cast<std::size_t>(command)].fetch_add(1, std::memory_order_relaxed);
  }
  static void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }

  // Keys, parked waits and values held in 2.x queues, summed over the tables of the servers
  // alive now.
  std::size_t key_count() const;
  std::size_t waiter_count() const;
  std::size_t queued_value_count() const;

  // A server's table, registered for its lifetime (TcpStoreServer holds one).
  class TableRegistration {
   public:
    explicit TableRegistration(const KeyTable& table);
    ~TableRegistration();
    TableRegistration(const TableRegistration&) = delete;
    TableRegistration& operator=(const TableRegistration&) = delete;

   private:
    const KeyTable* table_;
  };

 private:
  std::size_t sum_over_tables(std::size_t (KeyTable::*count)() const) const;

  mutable std::mutex tables_mutex_;
  std::vector<const KeyTable*> tables_;
};

// This process's ServerStats.
ServerStats& server_stats();

}  // namespace ddp::rdzv
