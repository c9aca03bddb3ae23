// Worker output routing: whole console lines under load, partial last lines, --label, --tee and
// --redirects files, --local_ranks_filter, and torchrun's tee prefix template.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "agent/cli/std_streams.hpp"
#include "agent/process/output_router.hpp"
#include "agent/process/worker_group.hpp"
#include "common/unique_fd.hpp"
#include "agent_test_util.hpp"

namespace ddp::agent {
namespace {

using namespace std::chrono_literals;
using test::lines_of;
using test::run_until;
using test::sh_worker;

struct OutputFixture : test::ConsoleFixture {
  void run(WorkerGroup& group, const std::vector<WorkerSpec>& specs) {
    group.start(specs);
    REQUIRE(run_until(io, [&] { return !group.running(); }));
  }
};

TEST_CASE("console lines of many workers never interleave mid-line", "[output]") {
  OutputFixture f;
  WorkerGroup group(f.io, f.options());
  // Each line is written in two pieces, so the agent often reads half a line.
  const char* script =
      "i=0; while [ $i -lt 1500 ]; do printf \"w$0 $i \"; printf 'abcdefghijklmnopqrstuvwxyz\\n'; "
      "i=$((i+1)); done";
  std::vector<WorkerSpec> specs;
  for (int r = 0; r < 4; ++r) {
    auto spec = sh_worker(script, r);
    spec.argv.push_back(std::to_string(r));  // $0
    specs.push_back(spec);
  }
  f.run(group, specs);
  std::map<int, int> next;
  const auto lines = lines_of(f.out.text());
  CHECK(lines.size() == 6000);
  for (const auto& line : lines) {
    // Exactly "w<worker> <i> abcdefghijklmnopqrstuvwxyz": a torn line fails to parse.
    std::istringstream in(line);
    char w = 0;
    int worker = -1, i = -1;
    std::string letters, extra;
    in >> w >> worker >> i >> letters >> extra;
    INFO(line);
    REQUIRE(w == 'w');
    REQUIRE(line == fmt::format("w{} {} abcdefghijklmnopqrstuvwxyz", worker, i));
    REQUIRE(i == next[worker]);  // each worker's lines in order
    ++next[worker];
  }
  CHECK(next.size() == 4);
}

TEST_CASE("a partial last line is flushed when the worker exits", "[output]") {
  OutputFixture f;
  WorkerGroup group(f.io, f.options());
  f.run(group, {sh_worker("echo first; printf 'no newline'; printf 'err' >&2")});
  CHECK(f.out.text() == "first\nno newline\n");
  CHECK(f.err.text() == "err\n");
}

TEST_CASE("with label on, every console line starts with [host:rank] (--label)", "[output]") {
  OutputFixture f;
  auto options = f.options();
  options.label = true;
  WorkerGroup group(f.io, options);
  auto spec = sh_worker("echo hello; echo oops >&2", 1);
  spec.rank = 5;
  f.run(group, {spec});
  CHECK(f.out.text() == "[node7:5]: hello\n");
  CHECK(f.err.text() == "[node7:5]: oops\n");
}

TEST_CASE("redirected streams go to their files, not the console (--redirects)", "[output]") {
  OutputFixture f;
  WorkerGroup group(f.io, f.options());
  auto spec = sh_worker("echo to-out; echo to-err >&2; printf tail >&2");
  spec.stdout_path = f.dir.file("stdout.log");
  spec.stderr_path = f.dir.file("stderr.log");
  SECTION("both streams") {
    spec.redirect_mask = kStdBoth;
    f.run(group, {spec});
    CHECK(f.out.text().empty());
    CHECK(f.err.text().empty());
    CHECK(test::read_file(spec.stdout_path) == "to-out\n");
    CHECK(test::read_file(spec.stderr_path) == "to-err\ntail");  // raw bytes
    CHECK(group.exits()[0].stderr_tail == std::vector<std::string>{"to-err", "tail"});
  }
  SECTION("stderr only") {
    spec.redirect_mask = kStdErr;
    f.run(group, {spec});
    CHECK(f.out.text() == "to-out\n");
    CHECK(f.err.text().empty());
    CHECK_FALSE(std::filesystem::exists(spec.stdout_path));
    CHECK(test::read_file(spec.stderr_path) == "to-err\ntail");
  }
}

TEST_CASE("teed streams go to the files and the console with a [default0]: prefix (--tee)",
          "[output]") {
  OutputFixture f;
  auto spec = sh_worker("echo a; echo b >&2", 2);
  spec.stdout_path = f.dir.file("stdout.log");
  spec.stderr_path = f.dir.file("stderr.log");
  spec.redirect_mask = kStdBoth;
  spec.tee_mask = kStdOut;
  SECTION("default prefix") {
    WorkerGroup group(f.io, f.options());
    f.run(group, {spec});
    CHECK(f.out.text() == "[default2]:a\n");
    CHECK(f.err.text().empty());  // redirected, not teed
    CHECK(test::read_file(spec.stdout_path) == "a\n");
    CHECK(test::read_file(spec.stderr_path) == "b\n");
  }
  SECTION("role name, template and label") {
    spec.ddprun_env["ROLE_NAME"] = "trainer";
    auto options = f.options();
    options.label = true;
    SECTION("role") {
      WorkerGroup group(f.io, options);
      f.run(group, {spec});
      CHECK(f.out.text() == "[node7:2]: [trainer2]:a\n");
    }
    SECTION("template") {
      options.log_line_prefix_template = "${role_name}-$rank:";
      WorkerGroup group(f.io, options);
      f.run(group, {spec});
      CHECK(f.out.text() == "[node7:2]: trainer-2:a\n");
    }
  }
}

TEST_CASE("a rank kept off the console by --local_ranks_filter keeps its files and tail",
          "[output]") {
  OutputFixture f;
  WorkerGroup group(f.io, f.options());
  auto hidden = sh_worker("echo hidden; echo hidden-err >&2; exit 2", 1);
  hidden.console_visible = false;
  hidden.stdout_path = f.dir.file("stdout.log");
  hidden.redirect_mask = kStdOut;
  hidden.tee_mask = kStdOut;
  f.run(group, {sh_worker("echo shown", 0), hidden});
  CHECK(f.out.text() == "shown\n");
  CHECK(f.err.text().empty());
  CHECK(test::read_file(hidden.stdout_path) == "hidden\n");
  for (const auto& e : group.exits()) {
    if (e.local_rank == 1) CHECK(e.stderr_tail == std::vector<std::string>{"hidden-err"});
  }
}

TEST_CASE("a log file that cannot be opened is an IoError naming it", "[output]") {
  OutputFixture f;
  WorkerGroup group(f.io, f.options());
  auto spec = sh_worker("true");
  spec.stdout_path = f.dir.file("missing-dir/stdout.log");
  spec.redirect_mask = kStdOut;
  CHECK_THROWS_WITH(group.start({spec}), Catch::Matchers::Contains(spec.stdout_path));
  CHECK_FALSE(group.running());
}

// A non-blocking console nobody reads, full to the brim: each router batch that does not fit is
// dropped after a bounded wait instead of stalling the loop, and later batches go out once there
// is room again. The log file and the tail keep every line.
TEST_CASE("a full non-blocking console drops lines instead of blocking the loop", "[output]") {
  test::TempDir dir;
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  UniqueFd console_read(fds[0]);
  UniqueFd console_write(fds[1]);
  const std::string filler(4096, 'x');
  while (::write(console_write.get(), filler.data(), filler.size()) > 0) {
  }
  REQUIRE(errno == EAGAIN);

  boost::asio::io_context io;
  std::vector<char> buffer(1 << 16);
  OutputRoute route;
  route.console_fd = console_write.get();
  route.console_prefix = "[p]:";
  route.file_path = dir.file("stdout.log");
  route.keep_tail = true;
  auto router = std::make_shared<OutputRouter>(io, route, buffer);
  const std::string lines = "one\ntwo\n";
  REQUIRE(::write(router->child_end(), lines.data(), lines.size()) ==
          static_cast<ssize_t>(lines.size()));
  router->drain_and_flush();
  CHECK(router->console_dropped_bytes() == std::string("[p]:one\n[p]:two\n").size());

  std::vector<char> sink(1 << 20);
  while (::read(console_read.get(), sink.data(), sink.size()) > 0) {
  }
  const std::string later = "three\n";
  REQUIRE(::write(router->child_end(), later.data(), later.size()) ==
          static_cast<ssize_t>(later.size()));
  router->drain_and_flush();
  const ssize_t n = ::read(console_read.get(), sink.data(), sink.size());
  REQUIRE(n > 0);
  CHECK(std::string(sink.data(), static_cast<size_t>(n)) == "[p]:three\n");
  CHECK(router->console_dropped_bytes() == std::string("[p]:one\n[p]:two\n").size());
  CHECK(test::read_file(route.file_path) == "one\ntwo\nthree\n");
  CHECK(router->tail_lines() == std::vector<std::string>{"one", "two", "three"});
}

TEST_CASE("tee_line_prefix follows Template.safe_substitute", "[output]") {
  CHECK(tee_line_prefix("", "default", 9, 0) == "[default0]:");
  CHECK(tee_line_prefix("[${role_name}${local_rank}]:", "r", 3, 1) == "[r1]:");
  CHECK(tee_line_prefix("$rank|$local_rank|$role_name", "w", 12, 4) == "12|4|w");
  CHECK(tee_line_prefix("$$rank ${unknown} $other $", "w", 1, 0) == "$rank ${unknown} $other $");
  CHECK(tee_line_prefix("${rank", "w", 1, 0) == "${rank");
  CHECK(tee_line_prefix("$ranks", "w", 1, 0) == "$ranks");
  SECTION("issue 33: ${hostname} and ${pid}") {
    CHECK(tee_line_prefix("[${hostname}:${pid}:$rank]", "w", 5, 1, "node7", 4711) ==
          "[node7:4711:5]");
    CHECK(tee_line_prefix("$hostname-$pid", "w", 5, 1, "h", 9) == "h-9");
  }
}

TEST_CASE("issue 33: matching lines are duplicated to the filtered log with the tee prefix",
          "[output]") {
  test::TempDir dir;
  boost::asio::io_context io;
  std::vector<char> buffer(1 << 16);
  auto filtered = std::make_shared<FilteredLog>(dir.file("filtered_stdout.log"),
                                                std::vector<std::string>{"loss", "a,b"});
  std::vector<std::shared_ptr<OutputRouter>> routers;
  for (const char* prefix : {"[default0]:", "[default1]:"}) {
    OutputRoute route;
    route.filtered = filtered;
    route.tee_prefix = prefix;
    routers.push_back(std::make_shared<OutputRouter>(io, route, buffer));
  }
  const std::string zero = "step 1 loss=0.5\nno match\nsaw a,b here\n";
  const std::string one = "loss=0.7 partial";
  REQUIRE(::write(routers[0]->child_end(), zero.data(), zero.size()) ==
          static_cast<ssize_t>(zero.size()));
  REQUIRE(::write(routers[1]->child_end(), one.data(), one.size()) ==
          static_cast<ssize_t>(one.size()));
  for (auto& router : routers) router->drain_and_flush();
  CHECK(test::read_file(filtered->path()) ==
        "[default0]:step 1 loss=0.5\n[default0]:saw a,b here\n[default1]:loss=0.7 partial\n");
  CHECK(filtered->matches("a,b"));
  CHECK_FALSE(filtered->matches("a"));
}

}  // namespace
}  // namespace ddp::agent
