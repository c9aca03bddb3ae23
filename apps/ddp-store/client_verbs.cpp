// The debugging verbs of ddp-store: parse `--addr H:P [--dialect 113|2] [--timeout S]` and the
// verb's positionals with CLI11, make one BlockingStore call, print the result on stdout.
// Keys go on the wire exactly as given: PyTorch's Python client puts "/" before its keys, so its
// key "k" is "/k" here.
#include "apps/ddp-store/client_verbs.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "common/parse_number.hpp"
#include "ddp/error.hpp"
#include "rendezvous/store_client/blocking_store.hpp"

namespace ddp::store_cli {
namespace {

using rdzv::BlockingStore;
using rdzv::Bytes;
using rdzv::to_bytes;

struct Verb {
  const char* name;
  const char* help;
};

constexpr Verb kVerbs[] = {
    {"get", "wait for KEY (up to --timeout) and print its value"},
    {"set", "set KEY to VALUE"},
    {"add", "add DELTA to the integer at KEY and print the result"},
    {"wait", "wait until every KEY exists (up to --timeout)"},
    {"num-keys", "print the number of keys in the store"},
    {"delete", "delete KEY; print 1 if it existed, else 0"},
    {"compare-set", "set KEY to DESIRED if it holds EXPECTED; print the value after"},
};

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
};

// "H:P", "[v6]:P". Throws ConfigError naming --addr.
Endpoint parse_addr(const std::string& text) {
  const auto bad = [&] {
    return ConfigError(fmt::format("--addr: expected HOST:PORT, got '{}'", text));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad();
  Endpoint ep;
  ep.host = text.substr(0, colon);
  if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']') {
    ep.host = ep.host.substr(1, ep.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  const auto value = parse_number<int>(port);
  if (!value || port.size() > 5) throw bad();
  if (*value < 1 || *value > 65535) {
    throw ConfigError(fmt::format("--addr: port {} is out of range 1..65535", *value));
  }
  ep.port = static_cast<std::uint16_t>(*value);
  return ep;
}

void print_value(const Bytes& value) {
  std::fwrite(value.data(), 1, value.size(), stdout);
  std::fputc('\n', stdout);
}

int run(const std::string& verb, std::vector<std::string> args) {
  CLI::App app(std::find_if(std::begin(kVerbs), std::end(kVerbs),
                            [&](const Verb& v) { return verb == v.name; })
                   ->help,
               "ddp-store " + verb);
  std::string addr;
  std::string dialect = "2";
  double timeout_s = 30;
  std::vector<std::string> keys;
  std::string key, value, expected;
  std::int64_t delta = 0;
  app.add_option("--addr", addr, "store address HOST:PORT")->required();
  app.add_option("--dialect", dialect,
                 "wire dialect: 2 (PyTorch 2.x, VALIDATE handshake) or 113 (PyTorch 1.13)")
      ->check(CLI::IsMember({"2", "113"}));
  app.add_option("--timeout", timeout_s, "seconds for connecting and for each call")
      ->check(CLI::PositiveNumber);
  if (verb == "wait") {
    app.add_option("key", keys, "keys to wait for")->required();
  } else if (verb != "num-keys") {
    app.add_option("key", key, "key, exactly as on the wire")->required();
  }
  if (verb == "set") app.add_option("value", value, "value")->required();
  if (verb == "add") app.add_option("delta", delta, "integer to add")->required();
  if (verb == "compare-set") {
    app.add_option("expected", expected, "expected current value ('' for a missing key)")
        ->required();
    app.add_option("desired", value, "value to store")->required();
  }
  try {
    std::reverse(args.begin(), args.end());  // CLI11 consumes a vector from the back
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ddp-store %s: %s\n", verb.c_str(), e.what());
    return 2;
  }

  rdzv::ConnectOptions options;
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000));
  options.connect_timeout = timeout;
  options.call_timeout = timeout;
  options.dialect = dialect == "113" ? rdzv::WireDialect::kTorch113 : rdzv::WireDialect::kTorch2;
  try {
    const Endpoint ep = parse_addr(addr);
    auto store = BlockingStore::connect(ep.host, ep.port, options);
    if (verb == "get") {
      print_value(store->get(key));
    } else if (verb == "set") {
      store->set(key, to_bytes(value));
      store->num_keys();  // SET has no reply: a round trip shows the server took it
    } else if (verb == "add") {
      std::printf("%lld\n", static_cast<long long>(store->add(key, delta)));
    } else if (verb == "wait") {
      store->wait(keys);
    } else if (verb == "num-keys") {
      std::printf("%lld\n", static_cast<long long>(store->num_keys()));
    } else if (verb == "delete") {
      std::printf("%d\n", store->delete_key(key) ? 1 : 0);
    } else if (verb == "compare-set") {
      print_value(store->compare_set(key, to_bytes(expected), to_bytes(value)));
    }
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "ddp-store %s: %s\n", verb.c_str(), e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "ddp-store %s: %s\n", verb.c_str(), e.what());
    return 1;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

bool is_client_verb(const std::string& verb) {
  return std::any_of(std::begin(kVerbs), std::end(kVerbs),
                     [&](const Verb& v) { return verb == v.name; });
}

int run_client_verb(const std::string& verb, const std::vector<std::string>& args) {
  if (!is_client_verb(verb)) {
    std::fprintf(stderr, "ddp-store: unknown verb '%s'\n", verb.c_str());
    return 2;
  }
  return run(verb, args);
}

}  // namespace ddp::store_cli
