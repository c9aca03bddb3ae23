// The HTTP codec of the etcd client. Beast's parser does the HTTP/1.1 work (chunked transfer
// coding above all: the gateway streams watch and keep-alive answers chunk by chunk); the JSON
// object splitter tracks only strings and brace depth, which is all a stream of objects needs.

#include "rendezvous/etcd/etcd_http.hpp"

#include <fmt/format.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>

#include "ddp/error.hpp"

namespace ddp::rdzv::etcd {

namespace http = boost::beast::http;

std::string encode_post(const std::string& host, const std::string& path, const std::string& body,
                        const std::string& token) {
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, host);
  if (!token.empty()) request.set(http::field::authorization, token);
  request.set(http::field::content_type, "application/json");
  request.set(http::field::user_agent, "ddprun");
  request.keep_alive(true);
  request.body() = body;
  request.prepare_payload();
  std::ostringstream out;
  out << request;
  return out.str();
}

ResponseReader::ResponseReader() {
  parser_.body_limit(boost::none);  // a watch stream never ends
  parser_.eager(true);
}

void ResponseReader::feed(std::string_view bytes) {
  pending_.append(bytes);
  std::size_t used = 0;
  while (used < pending_.size() && !parser_.is_done()) {
    boost::beast::error_code ec;
    const std::size_t n =
        parser_.put(boost::asio::buffer(pending_.data() + used, pending_.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) break;
    if (ec) {
      throw IoError(fmt::format("bad HTTP response: {}", ec.message()));
    }
    if (n == 0) break;
  }
  pending_.erase(0, used);
}

void ResponseReader::feed_eof() {
  if (parser_.is_done()) return;
  // Beast's put_eof expects some bytes first (it asserts so in debug builds).
  if (!parser_.got_some() && pending_.empty()) {
    throw IoError("the connection closed without a response (is the member https only?)");
  }
  boost::beast::error_code ec;
  parser_.put_eof(ec);
  if (ec) throw IoError(fmt::format("the connection closed mid-response ({})", ec.message()));
}

int ResponseReader::status() const { return static_cast<int>(parser_.get().result_int()); }

bool ResponseReader::keep_alive() const { return parser_.get().keep_alive(); }

std::string ResponseReader::take_body() {
  std::string body;
  body.swap(parser_.get().body());  // the parser appends to the (now empty) string
  return body;
}

std::optional<std::string> JsonObjectStream::next() {
  if (scanned_ == 0) {  // between objects
    const std::size_t start = buffer_.find_first_not_of(" \n\r\t,");
    if (start == std::string::npos) {
      buffer_.clear();  // only separators so far
      return std::nullopt;
    }
    if (buffer_[start] != '{') {
      throw IoError(fmt::format("etcd watch stream: expected a JSON object, got '{}'",
                                buffer_.substr(start, 40)));
    }
    buffer_.erase(0, start);  // drop the separators before the object
  }
  for (; scanned_ < buffer_.size(); ++scanned_) {
    const char c = buffer_[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      std::string object = buffer_.substr(0, scanned_ + 1);
      buffer_.erase(0, scanned_ + 1);
      scanned_ = 0;
      return object;
    }
  }
  if (buffer_.size() > kMaxObjectBytes) {
    throw IoError(fmt::format("etcd watch stream: a message exceeds {} bytes", kMaxObjectBytes));
  }
  return std::nullopt;
}

}  // namespace ddp::rdzv::etcd
