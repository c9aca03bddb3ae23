// The default is 1.13's dialect: it is the one both launchers on a PyTorch 1.13 system serve.
#include "runtime/src/store_dialect.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "ddp/error.hpp"

namespace ddp::runtime {

rdzv::WireDialect store_dialect_from_env() {
  const char* value = std::getenv("DDP_STORE_DIALECT");
  const std::string text = value != nullptr ? value : "";
  if (text.empty() || text == "torch113") return rdzv::WireDialect::kTorch113;
  if (text == "torch2") return rdzv::WireDialect::kTorch2;
  throw ConfigError(fmt::format(
      "environment variable DDP_STORE_DIALECT='{}' is not a store dialect (torch113, torch2)",
      text));
}

}  // namespace ddp::runtime
