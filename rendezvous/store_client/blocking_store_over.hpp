#pragma once
// blocking_store_over: a BlockingStore over any Store, built on its private loop. Apart from
// blocking_store.hpp because the factory's argument names Asio's executor.

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/store/store.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::rdzv {

// The store `make` builds on the private loop's executor; `address` names it in messages
// (BlockingStore::address()). `make` runs on the loop's thread.
std::unique_ptr<BlockingStore> blocking_store_over(
    std::string address, const std::function<std::unique_ptr<Store>(asio::any_io_executor)>& make);

}  // namespace ddp::rdzv
