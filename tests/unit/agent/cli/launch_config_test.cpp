// LaunchConfig values: node and worker counts, rendezvous defaults, entry points, timeouts.

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "agent/elastic/rendezvous_factory.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::Env;
using test::parse;

TEST_CASE("defaults match torchrun's", "[cli]") {
  const auto config = parse({"train.py"});
  CHECK(config.nnodes_min == 1);
  CHECK(config.nnodes_max == 1);
  CHECK(config.nproc_per_node == 1);
  CHECK(config.rdzv_backend == "static");
  CHECK(config.rdzv_id == "none");
  CHECK(config.master_addr == "127.0.0.1");
  CHECK_FALSE(config.master_port);  // one node: the agent picks a free port
  CHECK(config.node_rank == 0);
  CHECK(config.max_restarts == 0);
  CHECK(config.role == "default");
  CHECK(config.start_method == "spawn");
  CHECK(config.python == "python3");
  CHECK(config.redirects.all == kStdNone);
  CHECK(config.tee.all == kStdNone);
  CHECK_FALSE(config.local_ranks_filter);
  CHECK(config.signals_to_handle == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(config.signals_to_handle_raw == "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  CHECK(config.shutdown_timeout == std::chrono::seconds(30));
  CHECK(config.rdzv_conf.timeout() == std::chrono::seconds(900));
  CHECK(config.rdzv_conf.get("rank") == "0");
  CHECK(config.unsupported_features().empty());
  CHECK(entrypoint_name(config) == "train.py");
}

TEST_CASE("nnodes takes N or MIN:MAX", "[cli]") {
  const auto two = parse({"--nnodes=2", "--node_rank=1", "s"});
  CHECK(two.nnodes_min == 2);
  CHECK(two.nnodes_max == 2);
  CHECK(two.master_port == 29500);  // multi-node static defaults to torchrun's port
  CHECK(two.rdzv_endpoint == Endpoint{"127.0.0.1", 29500});
  const auto range = parse({"--nnodes=1:4", "--rdzv_backend=c10d", "s"});
  CHECK(range.nnodes_min == 1);
  CHECK(range.nnodes_max == 4);
  for (const char* bad : {"0", "3:2", "1:2:3", "x", "", ":2", "-1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse({std::string("--nnodes=") + bad, "s"}),
                      Catch::StartsWith("--nnodes: expected N or MIN:MAX"));
  }
}

TEST_CASE("nproc_per_node takes an integer, cpu, auto or gpu", "[cli]") {
  CHECK(parse({"--nproc_per_node=8", "s"}).nproc_per_node == 8);
  CHECK(parse({"--nproc_per_node=cpu", "s"}).nproc_per_node >= 1);
  CHECK(parse({"--nproc_per_node=auto", "s"}, {{"CUDA_VISIBLE_DEVICES", ""}}).nproc_per_node >= 1);
  CHECK_THROWS_WITH(parse({"--nproc_per_node=gpu", "s"}, {{"CUDA_VISIBLE_DEVICES", ""}}),
                    Catch::Contains("Cuda is not available"));
  CHECK_THROWS_WITH(parse({"--nproc_per_node=0", "s"}),
                    Catch::StartsWith("--nproc_per_node: must be a positive integer"));
  CHECK_THROWS_WITH(parse({"--nproc_per_node=tpu", "s"}),
                    Catch::StartsWith("--nproc_per_node: unsupported value 'tpu'"));
}

TEST_CASE("standalone is c10d on a free local port with a fresh run id", "[cli]") {
  const auto a = parse({"--standalone", "--rdzv_id=ignored", "s"});
  const auto b = parse({"--standalone", "s"});
  CHECK(a.rdzv_backend == "c10d");
  CHECK(a.rdzv_endpoint == Endpoint{"localhost", 0});
  CHECK(a.rdzv_id.size() == 36);
  CHECK(a.rdzv_id[14] == '4');  // uuid4
  CHECK(a.rdzv_id != b.rdzv_id);
  CHECK(a.source_of("rdzv_id") == ValueSource::kDerived);
}

TEST_CASE("etcd: a list of members, port 2379 by default, and a run id shared by the nodes",
          "[cli]") {
  for (const char* backend : {"--rdzv_backend=etcd", "--rdzv_backend=etcd-v2",
                              "--rdzv_backend=etcd-v3"}) {
    const auto config =
        parse({backend, "--nnodes=2:4", "--rdzv_endpoint=e1,e2:2381,e3:2383", "s"});
    CHECK(config.unsupported_features().empty());
    CHECK(config.rdzv_endpoint == Endpoint{"e1", 2379});  // the first member stands for the list
    CHECK(config.rdzv_endpoint_raw == "e1,e2:2381,e3:2383");
    CHECK_THAT(config.rdzv_id, Catch::StartsWith("job-"));
  }
}

TEST_CASE("etcd TLS files need protocol=https, a key needs its certificate", "[cli]") {
  boost::asio::io_context io;
  for (const char* conf : {"--rdzv_conf=cacert=/ca.pem", "--rdzv_conf=protocol=http,cert=/c.pem"}) {
    const auto config = parse({"--rdzv_backend=etcd", conf, "s"});
    CHECK_THROWS_WITH(make_rendezvous(config, io), Catch::Contains("need protocol=https"));
  }
  const auto config = parse({"--rdzv_backend=etcd", "--rdzv_conf=protocol=https,key=/k.pem", "s"});
  CHECK_THROWS_WITH(make_rendezvous(config, io),
                    Catch::StartsWith("--rdzv_conf key=/k.pem: needs cert="));
}

TEST_CASE("etcd TLS files that cannot be loaded are usage errors naming the key", "[cli]") {
  boost::asio::io_context io;
  const auto dir = std::filesystem::temp_directory_path() / "ddprun_cli_tls_test";
  std::filesystem::create_directories(dir);
  const std::string not_pem = (dir / "not.pem").string();
  std::ofstream(not_pem) << "not a certificate\n";
  const auto missing =
      parse({"--rdzv_backend=etcd", "--rdzv_conf=protocol=https,cacert=/no/ca.pem", "s"});
  CHECK_THROWS_MATCHES(make_rendezvous(missing, io), ConfigError,
                       Catch::Matchers::Message("--rdzv_conf cacert=/no/ca.pem: no such file"));
  const auto bad =
      parse({"--rdzv_backend=etcd", "--rdzv_conf=protocol=https,cert=" + not_pem, "s"});
  CHECK_THROWS_WITH(
      make_rendezvous(bad, io),
      Catch::StartsWith("--rdzv_conf cert=" + not_pem + ": cannot load the client certificate: "));
  std::filesystem::remove_all(dir);
}

TEST_CASE("c10d run ids: unique on one node, derived from the command across nodes", "[cli]") {
  const auto one = parse({"--rdzv_backend=c10d", "s"});
  CHECK(one.rdzv_id.size() == 36);
  CHECK(one.rdzv_endpoint == Endpoint{"localhost", 29400});
  const auto many =
      parse({"--rdzv_backend=c10d", "--nnodes=2", "--rdzv_endpoint=h", "s", "--lr", "1"});
  CHECK_THAT(many.rdzv_id, Catch::StartsWith("job-"));
  CHECK(many.rdzv_id.size() == 16);
  CHECK(many.source_of("rdzv_id") == ValueSource::kDerived);
  CHECK(many.rdzv_endpoint == Endpoint{"h", 29400});
  // Every node of the job derives the same id, whatever its worker count ...
  CHECK(parse({"--rdzv_backend=c10d", "--nnodes=2", "--rdzv_endpoint=h", "--nproc_per_node=4", "s",
               "--lr", "1"})
            .rdzv_id == many.rdzv_id);
  // ... and another job on the same endpoint gets another one.
  CHECK(
      parse({"--rdzv_backend=c10d", "--nnodes=2", "--rdzv_endpoint=h", "s", "--lr", "2"}).rdzv_id !=
      many.rdzv_id);
  CHECK(
      parse({"--rdzv_backend=c10d", "--nnodes=2", "--rdzv_endpoint=h", "s", "--lr1"}).rdzv_id !=
      parse({"--rdzv_backend=c10d", "--nnodes=2", "--rdzv_endpoint=h", "s", "--lr", "1"}).rdzv_id);
  CHECK(parse({"--rdzv_backend=static", "--nnodes=2", "s"}).rdzv_id == "none");
  CHECK(parse({"--rdzv_backend=c10d", "--rdzv_id=j", "s"}).rdzv_id == "j");
}

TEST_CASE("static endpoints and node ranks are checked", "[cli]") {
  CHECK(parse({"--rdzv_endpoint=[::1]:7", "s"}).rdzv_endpoint == Endpoint{"::1", 7});
  CHECK_THROWS_WITH(parse({"--rdzv_endpoint=host", "s"}),
                    Catch::Contains("port is missing in endpoint"));
  CHECK_THROWS_WITH(parse({"--nnodes=2", "--node_rank=2", "s"}),
                    Catch::StartsWith("--node_rank: 2 is out of range"));
  CHECK_THROWS_WITH(parse({"--master_port=70000", "s"}),
                    Catch::StartsWith("--master_port: must be between 0 and 65535"));
  CHECK_THROWS_WITH(parse({"--rdzv_backend=zookeeper", "s"}),
                    Catch::StartsWith("--rdzv_backend: invalid choice 'zookeeper'"));
  CHECK(parse({"--nnodes=3", "--node_rank=2", "s"}).rdzv_conf.get("rank") == "2");
}

TEST_CASE("entry point modes and their conflicts", "[cli]") {
  CHECK_THROWS_WITH(parse({"-m", "--no_python", "x"}),
                    Catch::Contains("--no_python: cannot be combined with -m/--module"));
  CHECK(entrypoint_name(parse({"--no_python", "/bin/true", "a"})) == "/bin/true");
}

TEST_CASE("an executable that is not a .py file runs as given, as with --no_python", "[cli]") {
  const auto direct = parse({"/bin/true", "a"});
  CHECK(direct.no_python);
  CHECK(direct.source_of("no_python") == ValueSource::kDerived);
  CHECK(parse({"true"}, Env{{"PATH", "/nonexistent:/bin"}}).no_python);  // found in PATH
  CHECK_FALSE(parse({"true"}, Env{{"PATH", "/nonexistent"}}).no_python);
  const std::string data = std::filesystem::temp_directory_path() / "ddprun_cli_not_executable";
  std::ofstream(data) << "print(1)\n";
  std::filesystem::permissions(
      data, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  CHECK_FALSE(parse({data}).no_python);  // a file that is not executable: Python
  std::filesystem::remove(data);
  CHECK_FALSE(parse({"/nonexistent/train"}).no_python);
  CHECK_FALSE(parse({"-m", "true"}, Env{{"PATH", "/bin"}}).no_python);
  CHECK(entrypoint_name(parse({"--run_path", "s.py"})) == "run_script_path");
  CHECK(entrypoint_name(parse({"-m", "pkg.mod"})) == "pkg.mod");
}

TEST_CASE("python is --python, else PYTHON_EXEC, else python3", "[cli]") {
  CHECK(parse({"s"}).python == "python3");
  CHECK(parse({"s"}, {{"PYTHON_EXEC", "/usr/bin/python3"}}).python == "/usr/bin/python3");
  CHECK(parse({"--python=/opt/py", "s"}, {{"PYTHON_EXEC", "/usr/bin/python3"}}).python ==
        "/opt/py");
}

TEST_CASE("shutdown timeout: flag, then TORCH_ELASTIC_SHUTDOWN_TIMEOUT, then 30 s", "[cli]") {
  const Env env = {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}};
  CHECK(parse({"s"}, env).shutdown_timeout == std::chrono::seconds(7));
  CHECK(parse({"--shutdown_timeout=0.25", "s"}, env).shutdown_timeout ==
        std::chrono::milliseconds(250));
  CHECK_THROWS_WITH(parse({"--shutdown_timeout=-1", "s"}),
                    Catch::StartsWith("--shutdown_timeout: expected a number of seconds"));
  CHECK_THROWS_WITH(parse({"s"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}}),
                    Catch::StartsWith("TORCH_ELASTIC_SHUTDOWN_TIMEOUT:"));
}

TEST_CASE("recovery: restart by default, inprocess by flag or PET_RECOVERY", "[cli]") {
  CHECK(parse({"s"}).recovery == "restart");
  CHECK(parse({"--recovery=inprocess", "s"}).recovery == "inprocess");
  CHECK(parse({"s"}, {{"PET_RECOVERY", "inprocess"}}).recovery == "inprocess");
  CHECK(parse({"--recovery", "restart", "s"}, {{"PET_RECOVERY", "inprocess"}}).recovery ==
        "restart");
  CHECK_THROWS_WITH(parse({"--recovery=never", "s"}),
                    Catch::StartsWith("--recovery: invalid choice 'never'"));
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_RECOVERY", "live"}}),
                    Catch::StartsWith("PET_RECOVERY: invalid choice 'live'"));
}

TEST_CASE("bad values get one line naming the flag", "[cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--max_restarts=-1", "--max_restarts:"},
      {"--monitor_interval=0", "--monitor_interval:"},
      {"--start_method=thread", "--start_method: invalid choice"},
      {"--redirects=4", "--redirects:"},
      {"--tee=10:1", "--tee:"},
      {"--local_ranks_filter=a", "--local_ranks_filter:"},
      {"--signals_to_handle=SIGNOPE", "--signals_to_handle: unknown signal"},
      {"--signals_to_handle=SIGKILL", "--signals_to_handle: SIGKILL cannot be caught"},
      {"--rdzv_conf=join_timeout", "--rdzv_conf:"},
      {"--numa_binding=everywhere", "--numa_binding: invalid choice"},
      {"--log_level=loud", "--log_level: invalid choice"},
      {"--role=", "--role: must not be empty"},
  };
  for (const auto& [arg, prefix] : cases) {
    INFO(arg);
    try {
      parse({arg, "s"});
      FAIL("no error");
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      CHECK_THAT(message, Catch::StartsWith(prefix));
      CHECK(message.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("features parsed but not implemented are reported for run time", "[cli]") {
  // --numa_binding and --rdzv_backend=etcd are supported.
  CHECK(parse({"--numa_binding=node", "--rdzv_backend=etcd", "s"}).unsupported_features().empty());
  CHECK(parse({"--log_dir=/dev/null", "s"}).unsupported_features().size() == 1);
  CHECK(parse({"--duplicate_stdout_filters=x", "--duplicate-stderr-filters=y", "s"})
            .unsupported_features()
            .empty());  // issue 33: supported
  CHECK(parse({"--event_log_handler=console", "s"}).unsupported_features().size() == 1);
}

TEST_CASE("an empty log_dir means a fresh temporary directory", "[cli]") {
  CHECK_FALSE(parse({"--log_dir=", "s"}).log_dir);
  CHECK(parse({"--log_dir", "/x", "s"}).log_dir == "/x");
}

TEST_CASE("log line prefix template falls back to TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[cli]") {
  CHECK(parse({"s"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}})
            .log_line_prefix_template == "[${rank}]");
}

TEST_CASE("environment_from reads KEY=VALUE arrays as getenv does", "[cli]") {
  const char* envp[] = {"A=1", "B==x", "junk", "A=2", "C=", nullptr};
  CHECK(environment_from(envp) == Env{{"A", "1"}, {"B", "=x"}, {"C", ""}});
  CHECK(environment_from(nullptr).empty());
}

SlurmDefaults two_node_job() {
  SlurmDefaults slurm;
  slurm.nnodes = 2;
  slurm.node_rank = 1;
  slurm.master_addr = "node01";
  slurm.master_port = 21234;
  slurm.run_id = "slurm-42";
  slurm.summary = "job 42: 2 nodes";
  return slurm;
}

LaunchConfig parse_in_slurm(const std::vector<std::string>& args, const Env& env = {}) {
  std::vector<const char*> argv{"ddprun"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  return parse_launch_config(static_cast<int>(argv.size()), argv.data(), env,
                             [](const Env&) { return std::optional(two_node_job()); });
}

TEST_CASE("SLURM fills only what flags and PET_ variables left unset", "[cli][slurm]") {
  const auto config = parse_in_slurm({"s.py"});
  REQUIRE(config.slurm);
  CHECK(config.nnodes_max == 2);
  CHECK(config.node_rank == 1);
  CHECK(config.master_addr == "node01");
  CHECK(config.master_port == 21234);
  CHECK(config.rdzv_id == "slurm-42");
  CHECK(config.rdzv_endpoint == Endpoint{"node01", 21234});
  CHECK(config.rdzv_conf.get("rank") == "1");
  CHECK(config.source_of("node_rank") == ValueSource::kSlurm);

  const auto given = parse_in_slurm({"--nnodes=3", "--master_port=1000", "--rdzv_id=mine", "s"},
                                    {{"PET_NODE_RANK", "2"}});
  CHECK(given.nnodes_max == 3);
  CHECK(given.node_rank == 2);
  CHECK(given.source_of("node_rank") == ValueSource::kEnv);
  CHECK(given.master_port == 1000);
  CHECK(given.rdzv_id == "mine");
  CHECK(given.master_addr == "node01");

  const auto c10d = parse_in_slurm({"--rdzv_backend=c10d", "s"});
  CHECK(c10d.rdzv_endpoint == Endpoint{"node01", 21234});
  CHECK(c10d.rdzv_id == "slurm-42");
}

TEST_CASE("errors about SLURM-filled values say so", "[cli][slurm]") {
  CHECK_THROWS_WITH(
      parse_in_slurm({"--nnodes=1", "s"}),
      Catch::StartsWith("--node_rank (from SLURM): 1 is out of range for --nnodes=1"));
  CHECK_THROWS_WITH(parse({"s"}, {{"PET_SIGNALS_TO_HANDLE", "BOGUS"}}),
                    Catch::StartsWith("PET_SIGNALS_TO_HANDLE: unknown signal"));
}

TEST_CASE("no_slurm and standalone skip SLURM detection", "[cli][slurm]") {
  const auto off = parse_in_slurm({"--no_slurm", "s"});
  CHECK_FALSE(off.slurm);
  CHECK(off.nnodes_max == 1);
  CHECK_FALSE(parse_in_slurm({"--standalone", "s"}).slurm);
  CHECK_FALSE(parse_in_slurm({"s"}, {{"PET_NO_SLURM", "1"}}).slurm);
}

}  // namespace
}  // namespace ddp::agent
