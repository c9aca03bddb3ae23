#pragma once
// HTTP/1.1 for the etcd gateway, sans-IO: the bytes of a JSON POST, and a response reader fed
// with whatever the socket returned (Beast's parser: Content-Length, chunked or close-delimited
// bodies). A watch's body is an endless stream of JSON objects; JsonObjectStream cuts it into
// one text per message. No sockets here: the client (etcd_client.cpp) moves the bytes.

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ddp::rdzv::etcd {

// The request line, headers and body of `POST path` to `host` ("h:port") with a JSON body;
// with an `Authorization` header carrying `token` (etcd's auth token) when it is not empty.
std::string encode_post(const std::string& host, const std::string& path, const std::string& body,
                        const std::string& token = "");

class ResponseReader {
 public:
  ResponseReader();

  // Consumes bytes from the connection (keeping any that complete no element yet). Throws
  // IoError on a malformed response.
  void feed(std::string_view bytes);
  // The peer closed the connection: completes a close-delimited body. Throws IoError when the
  // response was cut short.
  void feed_eof();

  bool has_header() const { return parser_.is_header_done(); }
  bool is_done() const { return parser_.is_done(); }
  int status() const;       // REQUIRES: has_header()
  bool keep_alive() const;  // REQUIRES: is_done(): the connection may carry another request
  // The body bytes received since the last call (a streamed body is taken piece by piece).
  std::string take_body();

 private:
  boost::beast::http::response_parser<boost::beast::http::string_body> parser_;
  std::string pending_;  // bytes the parser has not consumed yet
};

// Cuts a byte stream of concatenated JSON objects ({...}{...} or one per line) into objects.
class JsonObjectStream {
 public:
  static constexpr std::size_t kMaxObjectBytes = std::size_t{64} << 20;

  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete object's text, or nullopt until more bytes arrive. Throws IoError when an
  // object grows past kMaxObjectBytes or the stream holds something other than objects.
  std::optional<std::string> next();

 private:
  std::string buffer_;
  std::size_t scanned_ = 0;  // bytes of the current object scanned (0: between objects)
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace ddp::rdzv::etcd
