// OomWatch: finding the oom_kill counter (cgroup v2, v1, /proc/vmstat) in a fake /proc.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agent/process/oom_watch.hpp"
#include "agent_test_util.hpp"

namespace ddp::agent {
namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST_CASE("parse_oom_kill_count reads the oom_kill line", "[oom_watch]") {
  CHECK(parse_oom_kill_count("low 0\nhigh 0\nmax 4\noom 3\noom_kill 2\noom_group_kill 0\n") == 2u);
  CHECK(parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 17") == 17u);
  CHECK_FALSE(parse_oom_kill_count("oom_kill_disable 0\n").has_value());
  CHECK_FALSE(parse_oom_kill_count("oom_kill x\n").has_value());
}

TEST_CASE("OomWatch finds the counter of this process's memory cgroup", "[oom_watch]") {
  test::TempDir dir;
  const std::string proc = dir.file("proc");
  const std::string v2 = dir.file("cg2");
  const std::string v1 = dir.file("memory");
  write(proc + "/vmstat", "nr_free_pages 1\noom_kill 9\n");
  write(proc + "/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / " + v1 + " rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / " + v2 + " rw,relatime - cgroup2 cgroup2 rw\n");
  write(proc + "/self/cgroup", "4:memory:/jobs/7\n1:cpu:/\n0::/jobs/7\n");

  SECTION("cgroup v2 memory.events first") {
    write(v2 + "/jobs/7/memory.events", "low 0\noom 1\noom_kill 1\n");
    write(v1 + "/jobs/7/memory.oom_control", "oom_kill_disable 0\noom_kill 5\n");
    OomWatch watch(proc);
    CHECK(watch.counter_path() == v2 + "/jobs/7/memory.events");
    watch.mark();
    CHECK_FALSE(watch.rose_since_mark());
    write(v2 + "/jobs/7/memory.events", "low 0\noom 2\noom_kill 2\n");
    CHECK(watch.rose_since_mark());
    CHECK(watch.rose_since_mark());  // the baseline stays: every SIGKILL of the attempt counts
  }
  SECTION("cgroup v1 memory.oom_control on a hybrid host") {
    write(v1 + "/jobs/7/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
    OomWatch watch(proc);
    CHECK(watch.counter_path() == v1 + "/jobs/7/memory.oom_control");
    CHECK(watch.read() == 5u);
  }
  SECTION("the host-wide vmstat when no cgroup counter exists") {
    OomWatch watch(proc);
    CHECK(watch.counter_path() == proc + "/vmstat");
    CHECK(watch.read() == 9u);
  }
}

TEST_CASE("OomWatch on this machine reads a counter or none, without throwing", "[oom_watch]") {
  OomWatch watch;
  watch.mark();
  CHECK_FALSE(watch.rose_since_mark());
  CHECK(watch.read().has_value() == !watch.counter_path().empty());
}

}  // namespace
}  // namespace ddp::agent
