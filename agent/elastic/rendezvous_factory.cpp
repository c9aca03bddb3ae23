// make_rendezvous: maps the LaunchConfig's rendezvous options onto a backend.

#include "agent/elastic/rendezvous_factory.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "ddp/error.hpp"
#include "rendezvous/auth/job_credentials.hpp"
#include "rendezvous/auth/token_file.hpp"
#include "rendezvous/c10d/c10d_backend.hpp"
#include "rendezvous/etcd/etcd_backend.hpp"
#include "rendezvous/static/static_rendezvous.hpp"

namespace ddp::agent {
namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

// The job's credentials (the token file's secret, or munge under SLURM: job_credentials.hpp)
// bound to the run id, and who the workers' stores admit. Every store client of this process
// presents the credentials (the stack service's and the hang detector's too), so they become
// the process default.
rdzv::JobSecurity job_security(const LaunchConfig& config) {
  rdzv::JobSecurity security;
  security.worker_store_members_only = config.rdzv_conf.worker_store_members_only();
  security.credentials =
      rdzv::auth::job_credentials(config.rdzv_conf.get("token_file"), config.rdzv_id);
  rdzv::auth::set_default_credentials(security.credentials);
  return security;
}

std::unique_ptr<rdzv::Rendezvous> make_static(const LaunchConfig& config,
                                              boost::asio::io_context& io) {
  rdzv::StaticRendezvousOptions options;
  options.run_id = config.rdzv_id;
  options.nnodes = config.nnodes_max;
  options.node_rank = config.node_rank;
  // As torchrun: --rdzv_endpoint if given, else master_addr:master_port (parse_launch_config
  // folds both into rdzv_endpoint). No port on one node: node 0 binds a free one.
  options.master_addr = config.rdzv_endpoint.host;
  // (Multi-node always has a port: parse_launch_config defaults it to 29500.)
  options.master_port = static_cast<std::uint16_t>(config.rdzv_endpoint.port.value_or(0));
  options.timeout = config.rdzv_conf.timeout();
  options.max_restarts = config.max_restarts;
  options.connection_grace = config.rdzv_conf.connection_grace();
  options.node_name = host_name();
  options.security = job_security(config);
  return std::make_unique<rdzv::StaticRendezvous>(io, std::move(options));
}

// torchrun ignores --node_rank under c10d and etcd; here a given one orders the members
// (--hostfile passes the file order). -1 when not given.
int rank_hint(const LaunchConfig& config) {
  const ValueSource node_rank = config.source_of("node_rank");
  const bool given = node_rank == ValueSource::kCli || node_rank == ValueSource::kEnv;
  return given ? config.node_rank : -1;
}

// c10d: --nnodes MIN:MAX, --rdzv_endpoint (default port 29400) and torchrun's --rdzv_conf keys.
std::unique_ptr<rdzv::Rendezvous> make_c10d(const LaunchConfig& config,
                                            boost::asio::io_context& io) {
  const RdzvConf& conf = config.rdzv_conf;
  rdzv::C10dOptions options;
  options.settings.run_id = config.rdzv_id;
  options.settings.min_nodes = config.nnodes_min;
  options.settings.max_nodes = config.nnodes_max;
  options.settings.join_timeout = conf.join_timeout();
  options.settings.last_call_timeout = conf.last_call_timeout();
  options.settings.close_timeout = conf.close_timeout();
  options.settings.keep_alive_interval = conf.keep_alive_interval();
  options.settings.keep_alive_max_attempt = conf.keep_alive_max_attempt();
  options.settings.connection_grace = conf.connection_grace();
  options.endpoint_host = config.rdzv_endpoint.host;
  options.endpoint_port = static_cast<std::uint16_t>(config.rdzv_endpoint.port.value_or(29400));
  options.is_host = conf.is_host();
  options.local_addr = config.local_addr ? config.local_addr : conf.get("local_addr");
  options.read_timeout = conf.read_timeout();
  options.security = job_security(config);
  options.rank_hint = rank_hint(config);
  return rdzv::make_c10d_rendezvous(options, io);
}

// protocol=https and its files. torchrun would quietly ignore the files under plain http; here
// that is an error, as is a key without its certificate.
std::optional<rdzv::etcd::TlsFiles> etcd_tls_files(const RdzvConf& conf) {
  const auto cacert = conf.get("cacert");
  const auto cert = conf.get("cert");
  const auto key = conf.get("key");
  if (conf.get("protocol").value_or("http") != "https") {
    for (const auto& [name, value] : {std::pair{"cacert", cacert}, {"cert", cert}, {"key", key}}) {
      if (value) {
        throw ConfigError(fmt::format(
            "--rdzv_conf {}={}: TLS files need protocol=https (etcd is reached over http)", name,
            *value));
      }
    }
    return std::nullopt;
  }
  if (key && !cert) {
    throw ConfigError(
        fmt::format("--rdzv_conf key={}: needs cert= (the client certificate)", *key));
  }
  return rdzv::etcd::TlsFiles{cacert.value_or(""), cert.value_or(""), key.value_or("")};
}

// user= and password_file= (owner-only, as the job's token file): etcd's own authentication,
// beside or instead of TLS client certificates. One without the other is an error.
void etcd_user(const RdzvConf& conf, rdzv::etcd::EtcdOptions& options) {
  const auto user = conf.get("user");
  const auto password_file = conf.get("password_file");
  if (user.has_value() != password_file.has_value()) {
    throw ConfigError(user ? fmt::format("--rdzv_conf user={}: needs password_file=", *user)
                           : fmt::format("--rdzv_conf password_file={}: needs user=",
                                         *password_file));
  }
  if (!user) return;
  options.user = *user;
  options.password = rdzv::auth::read_token_file(*password_file, "--rdzv_conf password_file", 1);
}

// etcd (also etcd-v2, etcd-v3): --rdzv_endpoint lists the members; torchrun's etcd keys.
std::unique_ptr<rdzv::Rendezvous> make_etcd(const LaunchConfig& config,
                                            boost::asio::io_context& io) {
  const RdzvConf& conf = config.rdzv_conf;
  rdzv::etcd::EtcdOptions options;
  options.tls = etcd_tls_files(conf);
  etcd_user(conf, options);
  rdzv::etcd::EtcdSettings& s = options.settings;
  s.run_id = config.rdzv_id;
  s.min_nodes = config.nnodes_min;
  s.max_nodes = config.nnodes_max;
  // torchrun's etcd backend calls the whole-round timeout `timeout`; c10d calls it join_timeout.
  s.join_timeout = conf.is_given("join_timeout") || !conf.is_given("timeout")
                       ? conf.join_timeout()
                       : conf.timeout();
  s.last_call_timeout = conf.last_call_timeout();
  s.lease_ttl = conf.lease_ttl();
  s.connection_grace = conf.connection_grace();
  options.failover_window = std::min<std::chrono::milliseconds>(conf.read_timeout(),
                                                                s.join_timeout);
  options.attempt_timeout =
      std::min<std::chrono::milliseconds>(std::chrono::seconds(5), options.failover_window);
  const std::string& raw =
      config.rdzv_endpoint_raw.empty() ? std::string("localhost") : config.rdzv_endpoint_raw;
  for (std::size_t start = 0; start <= raw.size();) {
    const std::size_t comma = std::min(raw.find(',', start), raw.size());
    const std::string_view item = std::string_view(raw).substr(start, comma - start);
    start = comma + 1;
    if (item.find_first_not_of(" \t") == std::string_view::npos) continue;
    const Endpoint member = parse_endpoint(item, 2379, "--rdzv_endpoint");
    options.members.push_back(
        {member.host, static_cast<std::uint16_t>(member.port.value_or(2379))});
  }
  options.local_addr = config.local_addr ? config.local_addr : conf.get("local_addr");
  options.rank_hint = rank_hint(config);
  const rdzv::JobSecurity security = job_security(config);
  options.worker_store_members_only = security.worker_store_members_only;
  options.credentials = security.credentials;
  return rdzv::etcd::make_etcd_rendezvous(options, io);
}

}  // namespace

std::unique_ptr<rdzv::Rendezvous> make_rendezvous(const LaunchConfig& config,
                                                  boost::asio::io_context& io) {
  if (config.rdzv_backend == "static") return make_static(config, io);
  if (config.rdzv_backend == "c10d") return make_c10d(config, io);
  if (config.rdzv_backend.starts_with("etcd")) return make_etcd(config, io);
  throw ConfigError(fmt::format("--rdzv_backend={}: not supported yet", config.rdzv_backend));
}

}  // namespace ddp::agent
