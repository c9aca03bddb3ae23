// ddp::init: launcher environment -> store connection under the attempt's prefix -> default group.
// Keys of attempt N live under "ddp/attempt_N/", so a restarted job never reads the addresses or
// arrival marks its previous attempt left in the agent's store.
#include "ddp/init.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "collectives/gloo/gloo_process_group.hpp"
#include "common/check.hpp"
#include "common/log.hpp"
#include "ddp/error.hpp"
#include "ddp/launch_env.hpp"
#include "rendezvous/store_client/blocking_store.hpp"
#include "runtime/src/backend_choice.hpp"
#include "runtime/src/hosted_store.hpp"
#include "runtime/src/local_address.hpp"
#include "runtime/src/progress_group.hpp"
#include "runtime/src/store_dialect.hpp"
#ifdef DDP_WITH_CUDA
#include "collectives/nccl/nccl_process_group.hpp"
#endif

namespace ddp {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::shared_ptr<rdzv::BlockingStore> connect_store(const Context& c, const InitOptions& options,
                                                   const std::string& prefix) {
  rdzv::ConnectOptions connect;
  connect.connect_timeout = options.store_timeout;
  connect.call_timeout = options.store_timeout;
  connect.dialect = runtime::store_dialect_from_env();
  auto store =
      rdzv::BlockingStore::connect(c.master_addr, static_cast<std::uint16_t>(c.master_port),
                                   connect, prefix);
  store->set_timeout(options.store_timeout);
  return store;
}

std::shared_ptr<ProcessGroup> make_gloo_group(const Context& c, const InitOptions& options,
                                              std::shared_ptr<rdzv::BlockingStore> store) {
  coll::GlooOptions gloo;
  gloo.iface = env_or("GLOO_SOCKET_IFNAME", "");
  if (gloo.iface.empty()) {
    gloo.hostname = runtime::local_address_toward(c.master_addr, c.master_port);
  }
  gloo.timeout = options.timeout;
  gloo.arrival_grace = options.failure_report_grace;
  gloo.algorithm = coll::parse_allreduce_algorithm(env_or("DDP_ALLREDUCE_ALGORITHM", "auto"),
                                                   "environment variable DDP_ALLREDUCE_ALGORITHM");
  return coll::GlooProcessGroup::create(std::move(store), c.rank, c.world_size, gloo);
}

// The launcher's environment -> the store under `round_prefix`, or without one under the
// attempt's -> the default group.
Context init_under(const InitOptions& options, const std::optional<std::string>& round_prefix) {
  log::load_env_levels();  // SPDLOG_LEVEL ("coll=debug") for libddp's own loggers
  Context c;
  static_cast<LaunchEnv&>(c) = read_launch_env();
  const std::string backend = runtime::choose_backend(options.backend);
  if (runtime::must_host_store(c.rank)) runtime::host_store(c.master_port);
  auto store = connect_store(
      c, options, round_prefix.value_or(fmt::format("ddp/attempt_{}", c.restart_count)));
  auto world = store->with_prefix("world");
  if (backend == "nccl") {
#ifdef DDP_WITH_CUDA
    c.group = coll::make_nccl_group(std::move(world), c.rank, c.world_size, c.local_rank,
                                    options.timeout);
#endif
  } else {
    c.group = make_gloo_group(c, options, std::move(world));
  }
  DDP_CHECK(c.group != nullptr, "backend {} made no group", backend);
  // ddprun's hang detector reads this rank's collective progress from the file it names.
  if (const std::string progress = env_or(kProgressFileEnv, ""); !progress.empty()) {
    c.group = runtime::with_progress(std::move(c.group),
                                     std::make_shared<ProgressWriter>(progress));
  }
  log::get("worker")->debug("ddp init rank={} world_size={} backend={} store={}:{} attempt={}",
                            c.rank, c.world_size, backend, c.master_addr, c.master_port,
                            c.restart_count);
  return c;
}

}  // namespace

Context init(const InitOptions& options) { return init_under(options, std::nullopt); }

Context init_at(const ReformPlace& place, const InitOptions& options) {
  for (const auto& [name, value] : place.env) ::setenv(name.c_str(), value.c_str(), 1);
  return init_under(options, fmt::format("ddp/reform/round_{}", place.round));
}

}  // namespace ddp
