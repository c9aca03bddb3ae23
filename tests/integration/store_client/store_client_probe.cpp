// store-client-probe HOST PORT 113|2 PREFIX: runs every BlockingStore operation once against a
// live server and prints one "name=result" line each, for client_vs_*.py to check against what
// PyTorch's client sees. Exit 1 with the error on stderr when an operation fails.
#include <cstdio>
#include <string>

#include "ddp/error.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

using ddp::rdzv::BlockingStore;
using ddp::rdzv::Bytes;
using ddp::rdzv::to_bytes;
using ddp::rdzv::to_string;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: store-client-probe HOST PORT 113|2 PREFIX\n");
    return 2;
  }
  ddp::rdzv::ConnectOptions options;
  options.connect_timeout = std::chrono::seconds(10);
  options.call_timeout = std::chrono::seconds(10);
  const bool is_113 = std::string(argv[3]) == "113";
  options.dialect = is_113 ? ddp::rdzv::WireDialect::kTorch113 : ddp::rdzv::WireDialect::kTorch2;
  try {
    auto store = BlockingStore::connect(argv[1], static_cast<std::uint16_t>(std::stoi(argv[2])),
                                        options, argv[4]);
    store->multi_set({{"a", to_bytes("1")}, {"b", to_bytes("22")}});
    const auto values = store->multi_get({"a", "b"});
    std::printf("multi_get=%s,%s\n", to_string(values.at(0)).c_str(),
                to_string(values.at(1)).c_str());
    std::printf("check_present=%d\n", store->check({"a", "b"}) ? 1 : 0);
    std::printf("check_missing=%d\n", store->check({"a", "zz"}) ? 1 : 0);
    std::printf("add=%lld\n", static_cast<long long>(store->add("n", 41)));
    std::printf("compare_set=%s\n", to_string(store->compare_set("b", to_bytes("22"),
                                                                  to_bytes("33"))).c_str());
    std::printf("delete=%d\n", store->delete_key("a") ? 1 : 0);
    std::printf("get_from_peer=%s\n", to_string(store->get("from_peer")).c_str());
    if (!is_113) {
      store->append("b", to_bytes("x"));
      std::printf("append=%s\n", to_string(store->get("b")).c_str());
    }
    std::printf("num_keys=%lld\n", static_cast<long long>(store->num_keys()));
  } catch (const ddp::Error& e) {
    std::fprintf(stderr, "store-client-probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
