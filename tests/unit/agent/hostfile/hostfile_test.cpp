// The --hostfile format (host [slots=N], comments, duplicates) and --include/--exclude.

#include "agent/hostfile/hostfile.hpp"

#include <catch2/catch.hpp>

#include "ddp/error.hpp"

namespace ddp::agent {
namespace {

std::vector<std::string> names(const std::vector<HostEntry>& hosts) {
  std::vector<std::string> out;
  for (const HostEntry& host : hosts) out.push_back(host.host);
  return out;
}

TEST_CASE("hostfile lines give hosts in order with their slots", "[hostfile]") {
  const auto hosts = parse_hostfile(
      "# cluster\n"
      "node1 slots=4\n"
      "\n"
      "   node2\tslots=2   # the small one\n"
      "10.0.0.3\n"
      "user@node4 slots=1",
      "--hostfile f");
  REQUIRE(names(hosts) == std::vector<std::string>{"node1", "node2", "10.0.0.3", "user@node4"});
  CHECK(hosts[0].slots == 4);
  CHECK(hosts[1].slots == 2);
  CHECK_FALSE(hosts[2].slots);
  CHECK(hosts[3].slots == 1);
  CHECK(hosts[1].line == 4);
}

TEST_CASE("a host listed twice is refused, naming both lines", "[hostfile]") {
  CHECK_THROWS_WITH(parse_hostfile("a\nb\na slots=2\n", "--hostfile f"),
                    "--hostfile f: host a is listed twice (lines 1 and 3)");
}

TEST_CASE("malformed hostfile lines are refused with their line number", "[hostfile]") {
  CHECK_THROWS_WITH(parse_hostfile("a slots=0\n", "--hostfile f"),
                    "--hostfile f line 1: slots must be an integer from 1 to 65536, got '0'");
  CHECK_THROWS_WITH(parse_hostfile("a\nb slots=x\n", "--hostfile f"),
                    Catch::StartsWith("--hostfile f line 2: slots must be an integer"));
  CHECK_THROWS_WITH(parse_hostfile("a b\n", "--hostfile f"),
                    "--hostfile f line 1: one host per line, got 'b' after 'a'");
  CHECK_THROWS_WITH(parse_hostfile("a max_slots=2\n", "--hostfile f"),
                    "--hostfile f line 1: unknown setting 'max_slots' (only slots=N)");
  CHECK_THROWS_WITH(parse_hostfile("slots=2\n", "--hostfile f"),
                    Catch::StartsWith("--hostfile f line 1: expected 'host [slots=N]'"));
  CHECK_THROWS_WITH(parse_hostfile("# nothing\n\n", "--hostfile f"), "--hostfile f: lists no host");
}

TEST_CASE("an unreadable hostfile is named in the error", "[hostfile]") {
  CHECK_THROWS_AS(read_hostfile("/nonexistent/hosts", "--hostfile"), ConfigError);
  CHECK_THROWS_WITH(read_hostfile("/nonexistent/hosts", "--hostfile"),
                    "--hostfile: cannot read /nonexistent/hosts: No such file or directory");
}

TEST_CASE("include and exclude pick hosts of the file in file order", "[hostfile]") {
  const auto hosts = parse_hostfile("a\nb\nc\nd\n", "f");
  CHECK(names(select_hosts(hosts, "", "")) == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(names(select_hosts(hosts, "d,b", "")) == std::vector<std::string>{"b", "d"});
  CHECK(names(select_hosts(hosts, "", "a,c")) == std::vector<std::string>{"b", "d"});
  CHECK(names(select_hosts(hosts, "a,b", "b")) == std::vector<std::string>{"a"});
  CHECK_THROWS_WITH(select_hosts(hosts, "x", ""), "--include: host x is not in the hostfile");
  CHECK_THROWS_WITH(select_hosts(hosts, "", "a,,b"), "--exclude: empty host name in 'a,,b'");
  CHECK_THROWS_WITH(select_hosts(hosts, "a", "a"),
                    "--include/--exclude: no host of the hostfile is left");
}

}  // namespace
}  // namespace ddp::agent
