// The small parsing units: endpoints, --rdzv_conf, --redirects/--tee, signals, device counts.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "agent/cli/endpoint.hpp"
#include "agent/cli/nproc.hpp"
#include "agent/cli/rdzv_conf.hpp"
#include "agent/cli/std_streams.hpp"
#include "agent/core/signal_names.hpp"
#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

TEST_CASE("endpoints parse as torchrun parses them", "[cli][endpoint]") {
  CHECK(parse_endpoint("", 29400, "f") == Endpoint{"localhost", 29400});
  CHECK(parse_endpoint("  node1  ", 29400, "f") == Endpoint{"node1", 29400});
  CHECK(parse_endpoint("node1:123", 29400, "f") == Endpoint{"node1", 123});
  CHECK(parse_endpoint("10.0.0.1:0", std::nullopt, "f") == Endpoint{"10.0.0.1", 0});
  CHECK(parse_endpoint("[::1]", 29400, "f") == Endpoint{"::1", 29400});
  CHECK(parse_endpoint("[fe80::1]:65535", 29400, "f") == Endpoint{"fe80::1", 65535});
  CHECK(parse_endpoint("host", std::nullopt, "f").port == std::nullopt);
  SECTION("bad ports and hosts name the flag") {
    CHECK_THROWS_WITH(parse_endpoint("h:65536", 1, "--rdzv_endpoint"),
                      Catch::StartsWith("--rdzv_endpoint: invalid port '65536'"));
    CHECK_THROWS_WITH(parse_endpoint("h:", 1, "--e"), Catch::StartsWith("--e: invalid port"));
    CHECK_THROWS_WITH(parse_endpoint("h:12x", 1, "--e"), Catch::StartsWith("--e: invalid port"));
    CHECK_THROWS_WITH(parse_endpoint("bad host:1", 1, "--e"),
                      Catch::StartsWith("--e: invalid host"));
    CHECK_THROWS_WITH(parse_endpoint("[::1", 1, "--e"), Catch::StartsWith("--e: missing ']'"));
    CHECK_THROWS_WITH(parse_endpoint("[::1]x", 1, "--e"), Catch::StartsWith("--e: expected ':"));
  }
  CHECK(to_string(Endpoint{"::1", 5}) == "[::1]:5");
  CHECK(to_string(Endpoint{"h", std::nullopt}) == "h");
}

TEST_CASE("rdzv_conf keys, defaults and typed values", "[cli][rdzv_conf]") {
  const RdzvConf defaults = RdzvConf::parse("", "f");
  CHECK(defaults.timeout() == std::chrono::seconds(900));
  CHECK(defaults.join_timeout() == std::chrono::seconds(600));
  CHECK(defaults.last_call_timeout() == std::chrono::seconds(30));
  CHECK(defaults.close_timeout() == std::chrono::seconds(30));
  CHECK(defaults.heartbeat_timeout() == std::chrono::seconds(5));
  CHECK(defaults.keep_alive_interval() == std::chrono::seconds(5));
  CHECK(defaults.keep_alive_max_attempt() == 3);
  CHECK(defaults.read_timeout() == std::chrono::seconds(60));
  CHECK(defaults.connection_grace() == std::chrono::milliseconds(300));
  CHECK(RdzvConf::parse("connection_grace_ms=0", "f").connection_grace().count() == 0);
  CHECK_THROWS_WITH(RdzvConf::parse("connection_grace_ms=-1", "--rdzv_conf"),
                    Catch::Contains("connection_grace_ms must be an integer >= 0"));
  CHECK_FALSE(defaults.is_host());
  CHECK(defaults.reform_timeout() == std::chrono::seconds(30));
  CHECK(RdzvConf::parse("reform_timeout=2", "f").reform_timeout() == std::chrono::seconds(2));
  CHECK_THROWS_WITH(RdzvConf::parse("reform_timeout=0", "--rdzv_conf"),
                    Catch::Contains("reform_timeout must be an integer >= 1"));

  const RdzvConf conf = RdzvConf::parse(
      " join_timeout = 20 ,last_call_timeout=0,is_host=Yes,store_type=tcp,timeout=5,", "f");
  CHECK(conf.join_timeout() == std::chrono::seconds(20));
  CHECK(conf.last_call_timeout() == std::chrono::seconds(0));
  CHECK(conf.is_host() == true);
  CHECK(conf.timeout() == std::chrono::seconds(5));
  CHECK(conf.get("store_type") == "tcp");
  CHECK(RdzvConf::parse("is_host=0", "f").is_host() == false);
  CHECK(conf.to_string() ==
        "is_host=Yes,join_timeout=20,last_call_timeout=0,store_type=tcp,timeout=5");

  SECTION("malformed pairs and bad values name the flag") {
    CHECK_THROWS_WITH(RdzvConf::parse("a", "--rdzv_conf"),
                      Catch::StartsWith("--rdzv_conf: expected key=value"));
    CHECK_THROWS_WITH(RdzvConf::parse("a=", "--rdzv_conf"),
                      Catch::StartsWith("--rdzv_conf: expected key=value"));
    CHECK_THROWS_WITH(RdzvConf::parse("=1", "--rdzv_conf"),
                      Catch::StartsWith("--rdzv_conf: expected key=value"));
    CHECK_THROWS_WITH(RdzvConf::parse("read_timeout=0", "--rdzv_conf"),
                      Catch::StartsWith("--rdzv_conf: read_timeout must be an integer >= 1"));
    CHECK_THROWS_WITH(RdzvConf::parse("join_timeout=1.5", "--rdzv_conf"),
                      Catch::Contains("join_timeout must be an integer"));
    CHECK_THROWS_WITH(RdzvConf::parse("is_host=maybe", "--rdzv_conf"),
                      Catch::Contains("is_host must be a boolean"));
    CHECK_THROWS_WITH(RdzvConf::parse("protocol=grpc", "--rdzv_conf"),
                      Catch::Contains("protocol must be http or https, got 'grpc'"));
    CHECK_THROWS_WITH(RdzvConf::parse("lease_ttl=0", "--rdzv_conf"),
                      Catch::Contains("lease_ttl must be an integer >= 1"));
  }
}

TEST_CASE("rdzv_conf for etcd: lease_ttl, and whether the user gave timeout", "[cli][rdzv_conf]") {
  const RdzvConf defaults = RdzvConf::parse("", "f");
  CHECK(defaults.lease_ttl() == std::chrono::seconds(10));
  CHECK(defaults.get("timeout") == "900");    // injected as torchrun does...
  CHECK_FALSE(defaults.is_given("timeout"));  // ...so the etcd backend does not take it as asked
  const RdzvConf conf = RdzvConf::parse("timeout=20,lease_ttl=3,protocol=http", "f");
  CHECK(conf.is_given("timeout"));
  CHECK(conf.lease_ttl() == std::chrono::seconds(3));
  CHECK_FALSE(conf.is_given("join_timeout"));
}

TEST_CASE("issue 31: worker_store_allow is members by default, any on request",
          "[cli][rdzv_conf]") {
  CHECK(RdzvConf::parse("", "f").worker_store_members_only());
  CHECK(RdzvConf::parse("worker_store_allow=members", "f").worker_store_members_only());
  CHECK_FALSE(RdzvConf::parse("worker_store_allow=any", "f").worker_store_members_only());
  CHECK_THROWS_WITH(RdzvConf::parse("worker_store_allow=all", "--rdzv_conf"),
                    Catch::StartsWith("--rdzv_conf: worker_store_allow must be members or any"));
}

TEST_CASE("redirects and tee accept N or per-rank lists", "[cli][std_streams]") {
  for (int n = 0; n <= 3; ++n) {
    const StdStreams all = parse_std_streams(std::to_string(n), "f");
    CHECK(all.all == n);
    CHECK(all.mask_for(7) == n);
  }
  const StdStreams per = parse_std_streams("0:1,3:2,9:3", "f");
  CHECK(per.mask_for(0) == kStdOut);
  CHECK(per.mask_for(1) == kStdNone);
  CHECK(per.mask_for(3) == kStdErr);
  CHECK(per.mask_for(9) == kStdBoth);
  CHECK(to_string(per) == "0:1,3:2,9:3");
  for (const char* bad : {"", "4", "03", "0:4", "10:1", "0:1,", "a:1", "0=1", " 1", "0:1;1:2"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_std_streams(bad, "--tee"), Catch::StartsWith("--tee: expected 0-3"));
  }
}

TEST_CASE("local ranks filter", "[cli][std_streams]") {
  CHECK_FALSE(parse_local_ranks_filter("", "f"));
  CHECK(parse_local_ranks_filter("0, 2,2", "f") == std::set<int>{0, 2});
  CHECK_THROWS_WITH(parse_local_ranks_filter("0,x", "--local_ranks_filter"),
                    Catch::StartsWith("--local_ranks_filter:"));
  CHECK_THROWS_AS(parse_local_ranks_filter("-1", "f"), ConfigError);
  CHECK_THROWS_AS(parse_local_ranks_filter("0,,1", "f"), ConfigError);
}

TEST_CASE("signal lists take names, short names and numbers", "[cli][signals]") {
  CHECK(parse_signal_list("SIGTERM,int, 1 ,SIGUSR1", "f") ==
        std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGUSR1});
  CHECK(parse_signal_list("TERM,SIGTERM", "f") == std::vector<int>{SIGTERM});
  CHECK_THROWS_WITH(parse_signal_list("SIGSTOP", "f"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(parse_signal_list(",", "f"), Catch::Contains("expected a comma list"));
  CHECK_THROWS_WITH(parse_signal_list("999", "f"), Catch::Contains("unknown signal '999'"));
  CHECK(signal_name(SIGKILL) == "SIGKILL");
  CHECK(signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(signal_name(200) == "SIG200");
}

TEST_CASE("gpu counting reads device nodes and CUDA_VISIBLE_DEVICES", "[cli][nproc]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ddprun_cli_dev_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"}) {
    std::ofstream(dir / name).put('x');
  }
  using Env = std::map<std::string, std::string>;
  CHECK(count_cuda_devices({}, dir.string()) == 3);
  CHECK(count_cuda_devices(Env{{"CUDA_VISIBLE_DEVICES", "1"}}, dir.string()) == 1);
  CHECK(count_cuda_devices(Env{{"CUDA_VISIBLE_DEVICES", "0,2,-1,1"}}, dir.string()) == 2);
  CHECK(count_cuda_devices(Env{{"CUDA_VISIBLE_DEVICES", ""}}, dir.string()) == 0);
  CHECK(resolve_nproc_per_node("gpu", "f", {}, dir.string()) == 3);
  CHECK(resolve_nproc_per_node("auto", "f", {}, dir.string()) == 3);
  CHECK(count_cuda_devices({}, (dir / "missing").string()) == 0);
  CHECK_THROWS_WITH(resolve_nproc_per_node("gpu", "--nproc_per_node", {}, (dir / "x").string()),
                    Catch::Contains("Cuda is not available"));
  CHECK(resolve_nproc_per_node("auto", "f", {}, (dir / "x").string()) == count_usable_cpus());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ddp::agent
