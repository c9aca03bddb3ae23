#pragma once
// One process of the rendezvous simulation: members [first, last) of K, each a real
// C10dRendezvous (join, wait, read its place, then its monitor heartbeats and watches the change
// log) on this process's one io_context, reaching the store through CountingStore and either a
// connection of its own or a SharedLink. The driver steers it with lines on stdin and reads
// lines on stdout (the protocol is in simulate_shard.cpp).

#include <chrono>
#include <cstdint>
#include <string>

namespace ddp::bench {

struct ShardOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  int k = 0;        // members in the whole simulation
  int first = 0;    // this shard's members: [first, last)
  int last = 0;
  int per_connection = 1;  // members per SharedLink; 1: each member has its own connection
  std::chrono::milliseconds keep_alive{std::chrono::seconds(5)};
  int keep_alive_attempts = 3;
  std::string run_id = "sim";
};

// Runs the shard until the driver says "quit" or stdin closes; returns the exit code.
int run_shard(const ShardOptions& options);

}  // namespace ddp::bench
