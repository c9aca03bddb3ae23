#pragma once
// Opening and using one HTTP connection to one etcd member (shared by unary calls and watches).

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "rendezvous/etcd/etcd_client.hpp"

namespace ddp::rdzv::etcd::detail {

// Resolves and connects within `timeout`. Throws IoError naming the member ("connect: ...").
boost::asio::awaitable<std::unique_ptr<boost::beast::tcp_stream>> connect_member(
    boost::asio::any_io_executor executor, const Member& member, std::chrono::milliseconds timeout);

// Writes all of `bytes`. Throws IoError ("send: ...").
boost::asio::awaitable<void> send_all(boost::beast::tcp_stream& stream, const std::string& bytes);

}  // namespace ddp::rdzv::etcd::detail
