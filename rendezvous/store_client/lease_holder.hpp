#pragma once
// LeaseHolder: the client side of a store lease (store_lease.hpp). Keeps a WAIT parked on the
// lease's hold key over a store connection that serves nothing else, re-parking it when it ends,
// so that the store sees the lease dropped only when this process (or its link) is gone, and
// answering the roll calls rung on that key (store_roll_call.hpp). Runs on
// the executor of the io_context that owns the store; stopping or destroying it closes nothing
// but its own coroutine, which ends when its current wait does (the owner destroys the store).

#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/store/store.hpp"

namespace ddp::rdzv {

class LeaseHolder {
 public:
  // Starts holding the lease of `base` on `store` (which must stay valid until the coroutine has
  // seen stop(): destroy the store after stopping, which ends its parked wait). `park` bounds one
  // wait (a client re-parks after it; the store's grace covers the round trip in between).
  LeaseHolder(asio::any_io_executor executor, Store& store, std::string base,
              std::chrono::milliseconds park = std::chrono::minutes(10));
  ~LeaseHolder();
  LeaseHolder(const LeaseHolder&) = delete;
  LeaseHolder& operator=(const LeaseHolder&) = delete;

  void stop();

 private:
  std::shared_ptr<bool> stopped_;
};

}  // namespace ddp::rdzv
