// Each host's command under --hostfile: node ranks in file order, slots as --nproc_per_node, the
// first host as the endpoint, flags forwarded, variables exported, per-host flags refused.

#include "agent/hostfile/fanout_plan.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>

#include "agent/cli/cli_args.hpp"
#include "agent/hostfile/fanout_supervisor.hpp"
#include "ddp/error.hpp"
#include "tests/unit/agent/cli/cli_test_util.hpp"

namespace ddp::agent {
namespace {

using test::Env;

std::vector<RemoteLaunch> plan(const std::vector<std::string>& args, const std::string& hostfile,
                               const Env& env = {}) {
  std::vector<const char*> argv{"ddprun"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  const int argc = static_cast<int>(argv.size());
  const LaunchConfig config = parse_launch_config(argc, argv.data(), env);
  const RawArgs raw = read_cli_args(argc, argv.data(), env);
  const FanoutContext context{"/work dir", "/opt/ddprun", "hostfile-1234"};
  return plan_fanout(config, raw, parse_hostfile(hostfile, "f"), env, context);
}

bool has(const std::string& command, const std::string& part) {
  return command.find(part) != std::string::npos;
}

TEST_CASE("static: node ranks follow the file, slots set the workers, host 0 is master",
          "[fanout]") {
  const auto launches = plan({"--hostfile=h", "--max_restarts=2", "-m", "pkg.train", "--lr", "1"},
                             "n1 slots=2\nn2 slots=3\nn3\n");
  REQUIRE(launches.size() == 3);
  for (int i = 0; i < 3; ++i) {
    const RemoteLaunch& l = launches[static_cast<std::size_t>(i)];
    CHECK(l.node_rank == i);
    CHECK(l.argv[0] == "ssh");
    CHECK(l.argv[1] == "-o");
    CHECK(l.argv[2] == "BatchMode=yes");
    CHECK(l.argv[3] == l.host);
    CHECK(l.argv.size() == 5);
    CHECK(l.argv[4] == l.remote_command);
    CHECK(l.remote_command.starts_with("cd '/work dir' && exec env DDPRUN_NODE_NAME=" + l.host +
                                       " /opt/ddprun --stdin_signals --label --no_slurm "));
    CHECK(has(l.remote_command, "--node_rank=" + std::to_string(i)));
    CHECK(has(l.remote_command, "--nnodes=3 "));
    CHECK(has(l.remote_command, "--master_addr=n1 "));
    CHECK(has(l.remote_command, "--max_restarts=2 --module "));
    CHECK(l.remote_command.ends_with(" -- pkg.train --lr 1"));
    CHECK_FALSE(has(l.remote_command, "hostfile"));
    CHECK_FALSE(has(l.remote_command, "--rdzv_id"));
  }
  CHECK(launches[0].nproc_per_node == 2);
  CHECK(launches[1].nproc_per_node == 3);
  CHECK(launches[2].nproc_per_node == 1);
  CHECK(has(launches[1].remote_command, "--nproc_per_node=3 "));
}

TEST_CASE("a given --nproc_per_node wins over the slots", "[fanout]") {
  const auto launches = plan({"--hostfile=h", "--nproc_per_node=4", "t.py"}, "a slots=2\nb\n");
  for (const RemoteLaunch& l : launches) {
    CHECK(l.nproc_per_node == 4);
    CHECK(has(l.remote_command, "--nproc_per_node=4 "));
  }
}

TEST_CASE("c10d: the first host is the endpoint and every host shares a fresh run id", "[fanout]") {
  const auto launches = plan({"--hostfile=h", "--rdzv_backend=c10d", "t.py"}, "a\nfe80::1\n");
  CHECK(has(launches[1].remote_command, "--node_rank=1 "));  // orders c10d members: file order
  for (const RemoteLaunch& l : launches) {
    CHECK(has(l.remote_command, "--rdzv_backend=c10d"));
    CHECK(has(l.remote_command, "--rdzv_endpoint=a "));
    CHECK(has(l.remote_command, "--rdzv_id=hostfile-1234 "));
  }
  const auto v6 = plan({"--hostfile=h", "--rdzv_backend=c10d", "t.py"}, "fe80::1\na\n");
  CHECK(has(v6[1].remote_command, " '--rdzv_endpoint=[fe80::1]' "));
  const auto given =
      plan({"--hostfile=h", "--rdzv_backend=c10d", "--rdzv_endpoint=s:1", "--rdzv_id=j", "t.py"},
           "a\nb\n");
  CHECK(has(given[1].remote_command, "--rdzv_endpoint=s:1 "));
  CHECK(has(given[1].remote_command, "--rdzv_id=j "));
}

TEST_CASE("the ssh command, user@host and --remote_ddprun shape each command", "[fanout]") {
  const auto launches = plan(
      {"--hostfile=h", "--ssh", "ssh -F 'my cfg' -p 2222", "--remote_ddprun=/x/ddprun", "t.py"},
      "me@a\n");
  const RemoteLaunch& l = launches[0];
  CHECK(l.argv ==
        std::vector<std::string>{"ssh", "-F", "my cfg", "-p", "2222", "me@a", l.remote_command});
  CHECK(l.address == "a");
  CHECK(has(l.remote_command, "DDPRUN_NODE_NAME=a /x/ddprun "));
  CHECK_THROWS_WITH(plan({"--hostfile=h", "--ssh=ssh 'x", "t.py"}, "a\n"),
                    "--ssh: unclosed ' in 'ssh 'x'");
}

TEST_CASE("NCCL_*, GLOO_* and --export variables go to every host", "[fanout]") {
  const Env env = {{"NCCL_DEBUG", "INFO"},
                   {"GLOO_SOCKET_IFNAME", "eth0"},
                   {"HOME", "/h"},
                   {"FOO", "a b"},
                   {"PATH", "/bin"}};
  const auto launches = plan({"--hostfile=h", "--export", "FOO,BAR=1", "t.py"}, "a\n", env);
  const std::string& c = launches[0].remote_command;
  CHECK(has(c, " BAR=1 "));
  CHECK(has(c, " 'FOO=a b' "));
  CHECK(has(c, " GLOO_SOCKET_IFNAME=eth0 "));
  CHECK(has(c, " NCCL_DEBUG=INFO "));
  CHECK_FALSE(has(c, "HOME="));
  CHECK_THROWS_WITH(plan({"--hostfile=h", "--export=NOPE", "t.py"}, "a\n", env),
                    "--export: NOPE is not set here (give NOPE=VALUE to set it on the hosts)");
}

TEST_CASE("per-host and single-node flags are refused with --hostfile", "[fanout]") {
  CHECK_THROWS_WITH(plan({"--hostfile=h", "--node_rank=1", "--nnodes=2", "t.py"}, "a\nb\n"),
                    "--node_rank: differs from host to host; --hostfile sets it for each host");
  CHECK_THROWS_WITH(plan({"--hostfile=h", "--nnodes=3", "t.py"}, "a\nb\n"),
                    "--nnodes=3: the hostfile selects 2 host(s)");
  CHECK_THROWS_WITH(plan({"--hostfile=h", "--standalone", "t.py"}, "a\n"),
                    "--standalone: cannot be combined with --hostfile");
  CHECK_THROWS_WITH(test::parse({"--ssh=ssh", "t.py"}), "--ssh: only applies with --hostfile");
}

TEST_CASE("the script and its arguments reach the hosts as given", "[fanout]") {
  const auto launches = plan({"--hostfile=h", "t.py", "--", "--", "it's"}, "a\n");
  // torchrun drops one "--" after the script here; the host must drop one too.
  CHECK(launches[0].remote_command.ends_with(R"( -- t.py -- -- 'it'\''s')"));
}

TEST_CASE("PET_HOSTFILE turns the fan-out on", "[fanout]") {
  const auto config = test::parse({"t.py"}, {{"PET_HOSTFILE", "/h"}});
  CHECK(config.hostfile == "/h");
  CHECK(config.source_of("hostfile") == ValueSource::kEnv);
}

TEST_CASE("the root cause is the first failure other than 1, else the first", "[fanout]") {
  CHECK(root_cause_index({7}) == 0);
  CHECK(root_cause_index({1, 7, 1}) == 1);  // host 1 learnt of host 2's failure first
  CHECK(root_cause_index({255, 1}) == 0);
  CHECK(root_cause_index({1, 1}) == 0);
}

TEST_CASE("the dry run prints each host's command", "[fanout]") {
  std::ostringstream out;
  print_fanout_dry_run(plan({"--hostfile=h", "t.py"}, "a slots=2\nb\n"), out);
  const std::string text = out.str();
  CHECK(text.starts_with("ddprun --hostfile: 2 host(s); nothing is started\n"));
  CHECK(has(text, "\n# host a: node_rank=0 nproc_per_node=2\nssh -o BatchMode=yes a 'cd "));
  CHECK(has(text, "\n# host b: node_rank=1 nproc_per_node=1\nssh -o BatchMode=yes b 'cd "));
}

}  // namespace
}  // namespace ddp::agent
