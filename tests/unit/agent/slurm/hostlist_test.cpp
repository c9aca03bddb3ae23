#include <catch2/catch.hpp>

#include "agent/slurm/slurm.hpp"
#include "ddp/error.hpp"

using ddp::agent::expand_hostlist;
using Hosts = std::vector<std::string>;

TEST_CASE("hostlist: single names and top-level comma lists") {
  CHECK(expand_hostlist("node1") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b,c") == Hosts{"a", "b", "c"});
}

TEST_CASE("hostlist: ranges keep zero padding and commas inside brackets are ranges") {
  CHECK(expand_hostlist("node[01-04,07]") ==
        Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand_hostlist("n[08-11]") == Hosts{"n08", "n09", "n10", "n11"});
  CHECK(expand_hostlist("x[9-10]") == Hosts{"x9", "x10"});
  CHECK(expand_hostlist("n[3]") == Hosts{"n3"});
}

TEST_CASE("hostlist: suffixes and several brackets expand as a product, leftmost slowest") {
  CHECK(expand_hostlist("gpu-[1-2]-ib") == Hosts{"gpu-1-ib", "gpu-2-ib"});
  CHECK(expand_hostlist("a[1-2]b[3-4]") == Hosts{"a1b3", "a1b4", "a2b3", "a2b4"});
  CHECK(expand_hostlist("a[1-2],b,c[5,7]") == Hosts{"a1", "a2", "b", "c5", "c7"});
}

TEST_CASE("hostlist: malformed expressions throw ConfigError") {
  for (const char* bad : {"", "a,", ",a", "n[1-", "n]1[", "n[a-b]", "n[3-1]", "n[[1]]", "n[1-2",
                          "n[]", "n[1-99999999]", "n[1,]"}) {
    INFO(bad);
    CHECK_THROWS_AS(expand_hostlist(bad), ddp::ConfigError);
  }
}
