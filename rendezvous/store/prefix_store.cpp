// Every PrefixStore has a non-empty prefix (BlockingStore makes one only for a non-empty prefix;
// the rendezvous' prefixes start "/ddprun/"), so every key gains exactly one "/". A call returns
// the inner store's awaitable itself: no coroutine frame of its own.

#include "rendezvous/store/prefix_store.hpp"

namespace ddp::rdzv {

PrefixStore::PrefixStore(std::string prefix, Store& inner)
    : prefix_(std::move(prefix)), inner_(inner) {
  set_timeout(inner.timeout());
}

std::string prefixed_key(std::string_view prefix, std::string_view key) {
  std::string out;
  if (prefix.empty()) return out.append(key);
  out.reserve(prefix.size() + 1 + key.size());
  return out.append(prefix).append("/").append(key);
}

std::vector<std::string> PrefixStore::keys_of(std::vector<std::string> keys) const {
  for (auto& key : keys) key = key_of(key);
  return keys;
}

asio::awaitable<void> PrefixStore::multi_set(std::vector<std::pair<std::string, Bytes>> kvs) {
  for (auto& kv : kvs) kv.first = key_of(kv.first);
  return inner_.multi_set(std::move(kvs));
}

}  // namespace ddp::rdzv
