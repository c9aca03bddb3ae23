// The etcd client's TLS context and its error texts. Files are loaded at launch so that a wrong
// path or a key that does not match its certificate is a usage error, not a join that retries
// until its timeout. OpenSSL's own strings say what failed; we add which file or which check.

#include "rendezvous/etcd/etcd_tls.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/error.hpp>
#include <filesystem>

namespace ddp::rdzv::etcd {

namespace ssl = boost::asio::ssl;

namespace {

// Runs one load step of the context; a failure names the key and the file.
template <typename Load>
void load(const char* key, const std::string& path, const char* what, Load&& step) {
  std::error_code fs_error;
  if (!std::filesystem::is_regular_file(path, fs_error)) {
    throw ConfigError(fmt::format("--rdzv_conf {}={}: no such file", key, path));
  }
  boost::system::error_code error;
  step(error);
  if (error) {
    throw ConfigError(
        fmt::format("--rdzv_conf {}={}: cannot load {}: {}", key, path, what, error.message()));
  }
}

}  // namespace

std::shared_ptr<TlsContext> make_tls_context(const TlsFiles& files) {
  auto tls = std::make_shared<TlsContext>();
  tls->files = files;
  ssl::context& context = tls->context;
  // TLS 1.2 is the oldest etcd 3.4 accepts; the peer's certificate is always checked.
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  context.set_verify_mode(ssl::verify_peer);
  if (files.cacert.empty()) {
    boost::system::error_code error;
    context.set_default_verify_paths(error);
    if (error) {
      throw ConfigError(fmt::format(
          "--rdzv_conf protocol=https: cannot load the system's CA certificates ({}); give cacert=",
          error.message()));
    }
  } else {
    load("cacert", files.cacert, "CA certificates",
         [&](auto& error) { context.load_verify_file(files.cacert, error); });
  }
  if (!files.cert.empty()) {
    load("cert", files.cert, "the client certificate",
         [&](auto& error) { context.use_certificate_chain_file(files.cert, error); });
    const std::string& key_path = files.key.empty() ? files.cert : files.key;
    // OpenSSL checks the key against the certificate loaded above ("key values mismatch").
    load(files.key.empty() ? "cert" : "key", key_path, "the private key",
         [&](auto& error) { context.use_private_key_file(key_path, ssl::context::pem, error); });
  }
  return tls;
}

bool is_tls_error(const boost::system::error_code& error) {
  return error.category() == boost::asio::error::get_ssl_category();
}

std::string tls_error_text(const boost::system::error_code& error, SSL* ssl,
                           const std::string& host, const TlsContext& tls) {
  const long verify = ssl ? ::SSL_get_verify_result(ssl) : X509_V_OK;
  if (is_tls_error(error) && verify != X509_V_OK) {
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      return fmt::format("the member's certificate is not issued for {} ({})", host,
                         ::X509_verify_cert_error_string(verify));
    }
    const std::string against =
        tls.files.cacert.empty() ? "the system's CA store" : "cacert=" + tls.files.cacert;
    return fmt::format("the member's certificate does not verify against {}: {}", against,
                       ::X509_verify_cert_error_string(verify));
  }
  // The member's verdict on our certificate comes as an alert: in the handshake under TLS 1.2,
  // on the first read under TLS 1.3.
  const int alert =
      is_tls_error(error)
          ? ERR_GET_REASON(static_cast<unsigned long>(error.value())) - SSL_AD_REASON_OFFSET
          : -1;
  const bool about_our_certificate =
      alert == SSL_AD_BAD_CERTIFICATE || alert == SSL_AD_UNSUPPORTED_CERTIFICATE ||
      alert == SSL_AD_CERTIFICATE_REVOKED || alert == SSL_AD_CERTIFICATE_EXPIRED ||
      alert == SSL_AD_CERTIFICATE_UNKNOWN || alert == SSL_AD_UNKNOWN_CA ||
      alert == SSL_AD_CERTIFICATE_REQUIRED;
  if (about_our_certificate && tls.files.cert.empty()) {
    return fmt::format("the member wants a client certificate (give cert= and key=): {}",
                       error.message());
  }
  if (about_our_certificate) {
    return fmt::format("the member refused cert={}: {}", tls.files.cert, error.message());
  }
  return error.message();
}

}  // namespace ddp::rdzv::etcd
