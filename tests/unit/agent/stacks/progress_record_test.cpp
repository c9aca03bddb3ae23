// ProgressRecord: what a writer publishes is what read_progress_record() returns.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "common/progress_record.hpp"

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".progress"))
      .string();
}

}  // namespace

TEST_CASE("a progress record reads back what its writer published", "[progress]") {
  const std::string path = temp_path("published");
  {
    ddp::ProgressWriter writer(path);
    REQUIRE(writer.is_open());
    auto record = ddp::read_progress_record(path);
    REQUIRE(record);
    CHECK(record->seq == 0);
    CHECK(record->pid == ::getpid());
    CHECK_FALSE(record->in_collective());

    const std::int64_t before = ddp::progress_clock_ns();
    writer.on_issue("all_reduce");
    writer.on_issue("a_very_long_collective_name");
    writer.on_complete();
    record = ddp::read_progress_record(path);
    REQUIRE(record);
    CHECK(record->seq == 2);
    CHECK(record->completed == 1);
    CHECK(record->in_collective());
    CHECK(record->op == "a_very_long_col");  // 15 bytes and a NUL
    CHECK(record->since_ns >= before);
    writer.on_complete();
    CHECK_FALSE(ddp::read_progress_record(path)->in_collective());
  }
  std::filesystem::remove(path);
}

TEST_CASE("files that are not progress records read as nothing", "[progress]") {
  const std::string path = temp_path("garbage");
  CHECK_FALSE(ddp::read_progress_record(path));  // missing
  std::ofstream(path) << "short";
  CHECK_FALSE(ddp::read_progress_record(path));
  std::ofstream(path) << std::string(64, 'x');
  CHECK_FALSE(ddp::read_progress_record(path));
  std::filesystem::remove(path);
}

TEST_CASE("a writer that cannot create its file does nothing", "[progress]") {
  ddp::ProgressWriter writer("/nonexistent-dir/progress");
  CHECK_FALSE(writer.is_open());
  writer.on_issue("barrier");
  writer.on_complete();
}
