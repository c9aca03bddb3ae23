#pragma once
// TLS for the etcd client (--rdzv_conf protocol=https,cacert=,cert=,key=): the OpenSSL context
// built once from the user's files, and one-line texts for TLS failures. The per-connection
// checks (the member's name or IP) are set in etcd_connect.cpp.

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <string>

#include "ddp/error.hpp"
#include "rendezvous/etcd/etcd_settings.hpp"

namespace ddp::rdzv::etcd {

// A client context: peers verified against the CA files, our certificate when given. Built once
// per agent and shared by every connection (and the client's private revoke at exit).
struct TlsContext {
  TlsFiles files;
  boost::asio::ssl::context context{boost::asio::ssl::context::tls_client};
};

// Loads the files. Throws ConfigError naming the --rdzv_conf key and file that cannot be used
// (missing, not PEM, a key that does not match the certificate).
std::shared_ptr<TlsContext> make_tls_context(const TlsFiles& files);

// A failure TLS itself reported (a handshake or an alert from the member), as opposed to a
// broken or silent connection. Retrying it on the same member cannot help.
class TlsError : public IoError {
 public:
  using IoError::IoError;
};

// True when `error` comes from the TLS layer (OpenSSL's category), not the socket.
bool is_tls_error(const boost::system::error_code& error);

// Why TLS failed, in one line: the member's certificate against cacert or against the member's
// name (from `ssl`'s verification result, after a handshake; nullptr after one), the member
// refusing our certificate (an alert), or OpenSSL's reason.
std::string tls_error_text(const boost::system::error_code& error, SSL* ssl,
                           const std::string& host, const TlsContext& tls);

}  // namespace ddp::rdzv::etcd
