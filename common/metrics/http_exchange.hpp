#pragma once
// What the metrics endpoint answers, without sockets: the request limits its parser enforces and
// the response to each parsed request (Boost.Beast messages). MetricsServer does the I/O; unit
// tests drive these directly.

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace ddp::metrics {

using HttpRequest = boost::beast::http::request<boost::beast::http::empty_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;
using HttpRequestParser = boost::beast::http::request_parser<boost::beast::http::empty_body>;

// A request line and headers longer than this are refused (Prometheus sends about 300 bytes).
inline constexpr std::size_t kMaxRequestHeaderBytes = 8192;

// Sets the limits above on a fresh parser. A request with a body is refused too: the parser's
// empty body reports unexpected_body.
void apply_request_limits(HttpRequestParser& parser);

// The reply to one parsed request. GET or HEAD on /metrics (any query string): 200 with the text
// `scrape` returns, as kTextFormatContentType (HEAD: headers only). GET or HEAD on /: 200, a
// short text page pointing at /metrics. Another path: 404. Another method: 405 with "Allow: GET,
// HEAD". Keep-alive follows the request. `scrape` is called only for /metrics.
HttpResponse make_response(const HttpRequest& request, const std::function<std::string()>& scrape);

// The reply of a server with a plain handler: GET or HEAD on any path: `status` and `body` as
// text/plain (HEAD: headers only); another method: 405 as above. Keep-alive follows the request.
HttpResponse make_plain_response(const HttpRequest& request,
                                 const std::function<std::pair<unsigned, std::string>(
                                     std::string_view path)>& answer);

// The 400 reply to input that is not an acceptable HTTP request; always "Connection: close".
HttpResponse bad_request_response(std::string_view reason);

}  // namespace ddp::metrics
