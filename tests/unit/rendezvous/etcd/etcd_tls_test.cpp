// The etcd client over https against an in-process TLS member (a Beast HTTP server on port 0
// answering every POST with an empty range), with certificates made here with OpenSSL's API:
// the member checked against cacert and its name or IP, mutual TLS, and the one-line errors.

#include "rendezvous/etcd/etcd_tls.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "ddp/error.hpp"
#include "rendezvous/etcd/etcd_client.hpp"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using ddp::rdzv::etcd::ClientOptions;
using ddp::rdzv::etcd::EtcdClient;
using ddp::rdzv::etcd::make_tls_context;
using ddp::rdzv::etcd::Member;
using ddp::rdzv::etcd::RangeRequest;
using ddp::rdzv::etcd::TlsFiles;

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

// A P-256 key and a certificate for `cn` with the given v3 extensions, signed by `issuer` (self-
// signed when null).
std::pair<Key, Cert> make_cert(const char* cn, const std::vector<std::pair<int, std::string>>& ext,
                               X509* issuer = nullptr, EVP_PKEY* issuer_key = nullptr) {
  static long serial = 1;
  Key key(EVP_EC_gen("P-256"));
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, signer, cert.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : ext) {
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    REQUIRE(e != nullptr);
    X509_add_ext(cert.get(), e, -1);
    X509_EXTENSION_free(e);
  }
  REQUIRE(X509_sign(cert.get(), issuer_key ? issuer_key : key.get(), EVP_sha256()) > 0);
  return {std::move(key), std::move(cert)};
}

void write_pem(const std::string& path, X509* cert, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  if (cert) PEM_write_X509(f, cert);
  if (key) PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
}

// A directory of PEM files: ca.crt; server.crt/.key for `san`; client.crt/.key; other-ca.crt.
struct Pki {
  std::filesystem::path dir;
  explicit Pki(const std::string& san) {
    dir = std::filesystem::temp_directory_path() /
          ("ddprun_etcd_tls_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::vector<std::pair<int, std::string>> ca_ext = {
        {NID_basic_constraints, "critical,CA:TRUE"}, {NID_key_usage, "critical,keyCertSign"}};
    auto [ca_key, ca] = make_cert("test ca", ca_ext);
    auto [server_key, server] =
        make_cert("etcd", {{NID_subject_alt_name, san}, {NID_ext_key_usage, "serverAuth"}},
                  ca.get(), ca_key.get());
    auto [client_key, client] =
        make_cert("ddprun", {{NID_ext_key_usage, "clientAuth"}}, ca.get(), ca_key.get());
    auto [other_key, other] = make_cert("other ca", ca_ext);
    write_pem(path("ca.crt"), ca.get(), nullptr);
    write_pem(path("server.crt"), server.get(), nullptr);
    write_pem(path("server.key"), nullptr, server_key.get());
    write_pem(path("client.crt"), client.get(), nullptr);
    write_pem(path("client.key"), nullptr, client_key.get());
    write_pem(path("other-ca.crt"), other.get(), nullptr);
  }
  ~Pki() { std::filesystem::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
};

// An https "member": accepts on 127.0.0.1:0, answers each POST with an empty range.
class TlsMember {
 public:
  TlsMember(asio::io_context& io, const Pki& pki, bool require_client_cert)
      : context_(asio::ssl::context::tls_server),
        acceptor_(io, {asio::ip::make_address("127.0.0.1"), 0}) {
    context_.use_certificate_chain_file(pki.path("server.crt"));
    context_.use_private_key_file(pki.path("server.key"), asio::ssl::context::pem);
    if (require_client_cert) {
      context_.load_verify_file(pki.path("ca.crt"));
      context_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
    asio::co_spawn(io, accept_loop(), asio::detached);
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [error, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (error) co_return;
      asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> serve(tcp::socket socket) {
    asio::ssl::stream<tcp::socket> stream(std::move(socket), context_);
    auto [handshake] = co_await stream.async_handshake(asio::ssl::stream_base::server,
                                                       asio::as_tuple(asio::use_awaitable));
    if (handshake) co_return;  // the client saw why
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      auto [read, n] =
          co_await http::async_read(stream, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (read) co_return;
      http::response<http::string_body> response{http::status::ok, 11};
      response.set(http::field::content_type, "application/json");
      response.body() = R"({"header":{"revision":"7"}})";
      response.prepare_payload();
      auto [write, m] =
          co_await http::async_write(stream, response, asio::as_tuple(asio::use_awaitable));
      if (write) co_return;
    }
  }

  asio::ssl::context context_;
  tcp::acceptor acceptor_;
};

// One range call on `members` over TLS; its revision, or the text of the IoError it threw.
std::variant<std::int64_t, std::string> range_over_tls(asio::io_context& io,
                                                       std::vector<Member> members,
                                                       const TlsFiles& files) {
  ClientOptions options;
  options.members = std::move(members);
  options.tls = make_tls_context(files);
  options.attempt_timeout = std::chrono::seconds(5);
  options.failover_window = std::chrono::seconds(60);  // only a TLS verdict ends a call early
  auto client = std::make_shared<EtcdClient>(io.get_executor(), options);
  std::variant<std::int64_t, std::string> result;
  RangeRequest request;
  request.key = "/k";
  asio::co_spawn(io, client->range(request),
                 [&](std::exception_ptr error, ddp::rdzv::etcd::RangeResponse r) {
                   if (!error) {
                     result = r.revision;
                   } else {
                     try {
                       std::rethrow_exception(error);
                     } catch (const ddp::IoError& e) {
                       result = std::string(e.what());
                     }
                   }
                   io.stop();
                 });
  io.restart();
  io.run();
  return result;
}

std::string error_of(const std::variant<std::int64_t, std::string>& r) {
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

}  // namespace

TEST_CASE("https: the member's certificate must chain to cacert and name its IP or host",
          "[etcd][tls]") {
  asio::io_context io;
  SECTION("an IP SAN for an address, a DNS SAN for a name") {
    Pki pki("IP:127.0.0.1,DNS:localhost");
    TlsMember member(io, pki, false);
    const TlsFiles files{pki.path("ca.crt"), "", ""};
    CHECK(std::get<std::int64_t>(range_over_tls(io, {{"127.0.0.1", member.port()}}, files)) == 7);
    CHECK(std::get<std::int64_t>(range_over_tls(io, {{"localhost", member.port()}}, files)) == 7);
  }
  SECTION("a name the certificate does not carry") {
    Pki pki("IP:127.0.0.1");
    TlsMember member(io, pki, false);
    const std::string error =
        error_of(range_over_tls(io, {{"localhost", member.port()}}, {pki.path("ca.crt"), "", ""}));
    CHECK_THAT(error, Catch::Contains("TLS failed with every etcd member (localhost:"));
    CHECK_THAT(error, Catch::Contains("not issued for localhost (hostname mismatch)"));
  }
  SECTION("an address the certificate does not carry") {
    Pki pki("DNS:localhost,IP:10.9.9.9");
    TlsMember member(io, pki, false);
    const std::string error =
        error_of(range_over_tls(io, {{"127.0.0.1", member.port()}}, {pki.path("ca.crt"), "", ""}));
    CHECK_THAT(error, Catch::Contains("not issued for 127.0.0.1 (IP address mismatch)"));
  }
  SECTION("another CA: every member named, at once rather than after the failover window") {
    Pki pki("IP:127.0.0.1");
    TlsMember a(io, pki, false);
    TlsMember b(io, pki, false);
    const std::string error =
        error_of(range_over_tls(io, {{"127.0.0.1", a.port()}, {"127.0.0.1", b.port()}},
                                {pki.path("other-ca.crt"), "", ""}));
    CHECK_THAT(error, Catch::StartsWith("etcd range(/k): TLS failed with every etcd member"));
    for (const auto port : {a.port(), b.port()}) {
      CHECK_THAT(error, Catch::Contains(fmt::format(
                            "127.0.0.1:{}: TLS handshake: the member's certificate does not "
                            "verify against cacert={}: ",
                            port, pki.path("other-ca.crt"))));
    }
  }
}

TEST_CASE(
    "https: mutual TLS shows the client certificate; without one the member's refusal "
    "says so",
    "[etcd][tls]") {
  asio::io_context io;
  Pki pki("IP:127.0.0.1");
  TlsMember member(io, pki, true);
  const std::vector<Member> members = {{"127.0.0.1", member.port()}};
  CHECK(std::get<std::int64_t>(range_over_tls(
            io, members, {pki.path("ca.crt"), pki.path("client.crt"), pki.path("client.key")})) ==
        7);
  const std::string error = error_of(range_over_tls(io, members, {pki.path("ca.crt"), "", ""}));
  CHECK_THAT(error, Catch::Contains("the member wants a client certificate (give cert= and key=)"));
}

TEST_CASE("https: files that cannot be used are ConfigErrors naming the key", "[etcd][tls]") {
  Pki pki("IP:127.0.0.1");
  CHECK_THROWS_MATCHES(
      make_tls_context({pki.path("nope.crt"), "", ""}), ddp::ConfigError,
      Catch::Matchers::Message("--rdzv_conf cacert=" + pki.path("nope.crt") + ": no such file"));
  CHECK_THROWS_WITH(make_tls_context({"", pki.path("client.crt"), pki.path("server.key")}),
                    Catch::StartsWith("--rdzv_conf key=" + pki.path("server.key") +
                                      ": cannot load the private key: "));
  CHECK_THROWS_WITH(make_tls_context({"", pki.path("client.crt"), ""}),
                    Catch::StartsWith("--rdzv_conf cert=" + pki.path("client.crt") +
                                      ": cannot load the private key: "));
  CHECK_NOTHROW(
      make_tls_context({pki.path("ca.crt"), pki.path("client.crt"), pki.path("client.key")}));
}
