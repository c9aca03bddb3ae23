// Compares expand_hostlist with `scontrol show hostnames`, the reference, where scontrol exists.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "agent/slurm/slurm.hpp"
#include "tests/unit/common/temp_dir.hpp"

namespace {

// scontrol needs some configuration source even for a pure parse; a minimal one in `dir`.
std::string write_minimal_conf(const ddp::test::TempDir& dir) {
  dir.write(
      "slurm.conf",
      "ClusterName=ddptest\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n");
  return dir.file("slurm.conf");
}

std::vector<std::string> scontrol_hostnames(const std::string& conf,
                                            const std::string& expression) {
  std::string command =
      "SLURM_CONF=" + conf + " scontrol show hostnames '" + expression + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string text;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) text += buffer;
  REQUIRE(pclose(pipe) == 0);
  std::vector<std::string> hosts;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) hosts.push_back(line);
  return hosts;
}

}  // namespace

TEST_CASE("hostlist: agrees with scontrol show hostnames") {
  if (std::system("command -v scontrol >/dev/null 2>&1") != 0) {
    WARN("scontrol not installed; comparison skipped");
    return;
  }
  const ddp::test::TempDir dir("ddp-slurm-conf");
  const std::string conf = write_minimal_conf(dir);
  for (const char* expression :
       {"node1", "a,b,c", "node[01-04,07]", "n[08-11],x[9-10]", "a[1-2]b[3-4]", "a[1-2],b,c[5,7]",
        "rack[1-2]-n[001-003]", "z[0098-0102]"}) {
    INFO(expression);
    CHECK(ddp::agent::expand_hostlist(expression) == scontrol_hostnames(conf, expression));
  }
}
