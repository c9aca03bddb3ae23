// Routing of the metrics endpoint. HEAD gets the headers GET would (with the same
// Content-Length), which is what curl -I and load balancers' health checks expect.

#include "common/metrics/http_exchange.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/verb.hpp>

#include "common/metrics/registry.hpp"

namespace ddp::metrics {
namespace http = boost::beast::http;
namespace {

constexpr std::string_view kServerName = "ddprun";
constexpr std::string_view kIndexPage = "ddprun metrics exporter\nPrometheus metrics: /metrics\n";

HttpResponse text_response(const HttpRequest& request, http::status status,
                           std::string_view content_type, std::string body) {
  HttpResponse response(status, request.version());
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, content_type);
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  if (request.method() == http::verb::head) {
    // Content-Length stays that of the GET response; the body is not sent.
    const auto length = response.body().size();
    response.body().clear();
    response.content_length(length);
  }
  return response;
}

bool is_readable(const HttpRequest& request) {
  return request.method() == http::verb::get || request.method() == http::verb::head;
}

HttpResponse method_not_allowed(const HttpRequest& request) {
  auto response = text_response(request, http::status::method_not_allowed, "text/plain",
                                "only GET and HEAD are served\n");
  response.set(http::field::allow, "GET, HEAD");
  return response;
}

// The path without its query string ("/metrics?x=1" -> "/metrics").
std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

}  // namespace

void apply_request_limits(HttpRequestParser& parser) {
  parser.header_limit(static_cast<std::uint32_t>(kMaxRequestHeaderBytes));
  parser.body_limit(0);
}

HttpResponse make_response(const HttpRequest& request, const std::function<std::string()>& scrape) {
  if (!is_readable(request)) return method_not_allowed(request);
  const std::string_view path = path_of(request.target());
  if (path == "/metrics") {
    return text_response(request, http::status::ok, kTextFormatContentType, scrape());
  }
  if (path == "/")
    return text_response(request, http::status::ok, "text/plain", std::string(kIndexPage));
  return text_response(request, http::status::not_found, "text/plain",
                       "not found; metrics are at /metrics\n");
}

HttpResponse make_plain_response(const HttpRequest& request,
                                 const std::function<std::pair<unsigned, std::string>(
                                     std::string_view path)>& answer) {
  if (!is_readable(request)) return method_not_allowed(request);
  auto [status, body] = answer(path_of(request.target()));
  return text_response(request, static_cast<http::status>(status), "text/plain", std::move(body));
}

HttpResponse bad_request_response(std::string_view reason) {
  HttpResponse response(http::status::bad_request, 11);
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, "text/plain");
  response.keep_alive(false);
  response.body() = std::string("bad request: ") + std::string(reason) + "\n";
  response.prepare_payload();
  return response;
}

}  // namespace ddp::metrics
