// The lease document is JSON ({"version":1,"grace_ms","append","value"}) so that a standalone
// `ddp-store serve` needs no settings of its own: every lease carries its grace.

#include "rendezvous/store/store_lease.hpp"

#include <nlohmann/json.hpp>

namespace ddp::rdzv {

namespace {
using nlohmann::json;
constexpr int kVersion = 1;
}  // namespace

std::optional<std::string> lease_base_of(const std::string& key) {
  if (!key.ends_with(kLeaseHoldSuffix) || key.size() == kLeaseHoldSuffix.size()) {
    return std::nullopt;
  }
  return key.substr(0, key.size() - kLeaseHoldSuffix.size());
}

Bytes encode(const Lease& lease) {
  json doc = json::object();
  doc["version"] = kVersion;
  doc["grace_ms"] = lease.grace.count();
  doc["append"] = lease.append_key;
  doc["value"] = lease.value;
  return to_bytes(doc.dump());
}

std::optional<Lease> decode_lease(const Bytes& bytes) {
  const json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != kVersion) {
    return std::nullopt;
  }
  const auto grace = doc.find("grace_ms");
  const auto key = doc.find("append");
  const auto value = doc.find("value");
  if (grace == doc.end() || !grace->is_number_integer() || grace->get<long long>() < 0 ||
      key == doc.end() || !key->is_string() || key->get<std::string>().empty() ||
      value == doc.end() || !value->is_string()) {
    return std::nullopt;
  }
  return Lease{std::chrono::milliseconds(grace->get<long long>()), key->get<std::string>(),
               value->get<std::string>()};
}

Bytes expired_value(const Lease& lease, std::chrono::milliseconds after) {
  std::string text = lease.value;
  const std::string ms = std::to_string(after.count());
  for (auto at = text.find(kLeaseAfterMs); at != std::string::npos;
       at = text.find(kLeaseAfterMs, at + ms.size())) {
    text.replace(at, kLeaseAfterMs.size(), ms);
  }
  return to_bytes(text);
}

}  // namespace ddp::rdzv
