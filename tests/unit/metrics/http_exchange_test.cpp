// The endpoint's HTTP handling without sockets: Beast's parser under our limits, and the
// response each request gets.

#include "common/metrics/http_exchange.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <catch2/catch.hpp>
#include <string>

#include "common/metrics/registry.hpp"

using namespace ddp::metrics;
namespace http = boost::beast::http;

namespace {

// Feeds `text` to a parser with the endpoint's limits; the error (none when complete).
boost::system::error_code parse(const std::string& text, HttpRequestParser& parser) {
  apply_request_limits(parser);
  parser.eager(true);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(text), ec);
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  return ec;
}

HttpResponse respond(const std::string& text) {
  HttpRequestParser parser;
  REQUIRE_FALSE(parse(text, parser));
  REQUIRE(parser.is_done());
  return make_response(parser.get(), [] { return std::string("m 1\n"); });
}

}  // namespace

TEST_CASE("GET /metrics answers the exposition as text 0.0.4", "[http]") {
  const auto response = respond("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  CHECK(response.result() == http::status::ok);
  CHECK(response[http::field::content_type] == kTextFormatContentType);
  CHECK(response.body() == "m 1\n");
  CHECK(response.keep_alive());
  CHECK(response[http::field::content_length] == "4");
}

TEST_CASE("a query string is ignored and HEAD gets GET's headers without a body", "[http]") {
  CHECK(respond("GET /metrics?x=1 HTTP/1.1\r\n\r\n").body() == "m 1\n");
  const auto head = respond("HEAD /metrics HTTP/1.1\r\n\r\n");
  CHECK(head.result() == http::status::ok);
  CHECK(head.body().empty());
  CHECK(head[http::field::content_length] == "4");
}

TEST_CASE("other paths get 404, other methods 405, and HTTP/1.0 closes", "[http]") {
  CHECK(respond("GET / HTTP/1.1\r\n\r\n").result() == http::status::ok);
  CHECK(respond("GET /other HTTP/1.1\r\n\r\n").result() == http::status::not_found);
  const auto del = respond("DELETE /metrics HTTP/1.1\r\n\r\n");
  CHECK(del.result() == http::status::method_not_allowed);
  CHECK(del[http::field::allow] == "GET, HEAD");
  CHECK_FALSE(respond("GET /metrics HTTP/1.0\r\n\r\n").keep_alive());
  CHECK_FALSE(respond("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive());
}

TEST_CASE("input that is not an acceptable request is an error", "[http]") {
  HttpRequestParser parser;
  SECTION("garbage") { CHECK(parse("\x16\x03\x01 hello\r\n\r\n", parser)); }
  SECTION("a bad version") { CHECK(parse("GET /metrics HTTP/9\r\n\r\n", parser)); }
  SECTION("headers past the limit") {
    const std::string big(kMaxRequestHeaderBytes, 'a');
    CHECK(parse("GET /metrics HTTP/1.1\r\nX: " + big + "\r\n\r\n", parser) ==
          http::error::header_limit);
  }
  SECTION("a body") {
    CHECK(parse("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", parser));
  }
  const auto reply = bad_request_response("bad method");
  CHECK(reply.result() == http::status::bad_request);
  CHECK_FALSE(reply.keep_alive());
}

TEST_CASE("a plain handler answers GET and HEAD on any path, and 405 to other methods",
          "[http]") {
  const auto answer = [](const std::string& text) {
    HttpRequestParser parser;
    REQUIRE_FALSE(parse(text, parser));
    return make_plain_response(parser.get(), [](std::string_view path) {
      return std::pair(path == "/" ? 200u : 503u, std::string("path=") + std::string(path));
    });
  };
  const auto ok = answer("GET /?probe=1 HTTP/1.1\r\n\r\n");
  CHECK(ok.result() == http::status::ok);
  CHECK(ok.body() == "path=/");
  CHECK(ok[http::field::content_type] == "text/plain");
  const auto stale = answer("HEAD /healthz HTTP/1.1\r\n\r\n");
  CHECK(stale.result() == http::status::service_unavailable);
  CHECK(stale.body().empty());
  CHECK(stale[http::field::content_length] == "13");
  const auto post = answer("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  CHECK(post.result() == http::status::method_not_allowed);
  CHECK(post[http::field::allow] == "GET, HEAD");
}
