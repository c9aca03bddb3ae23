#pragma once
// KeyLeases: the store's side of store leases (store_lease.hpp). It observes the waits the
// KeyTable drops without waking them (a store connection closed, or a client gave up), and when
// the last wait on a lease's hold key is gone for the lease's grace, appends the lease's value
// and deletes the lease. Every MemoryStore has one, so the TCP server (agent-hosted or `ddp-store
// serve`) and in-process users share it. Runs on the store's executor; nothing polls.

#include <boost/asio/any_io_executor.hpp>

#include <memory>

namespace ddp::rdzv {

class KeyTable;

class KeyLeases {
 public:
  // Observes `table` until destroyed; the table must outlive it.
  KeyLeases(boost::asio::any_io_executor executor, KeyTable& table);
  ~KeyLeases();
  KeyLeases(const KeyLeases&) = delete;
  KeyLeases& operator=(const KeyLeases&) = delete;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ddp::rdzv
