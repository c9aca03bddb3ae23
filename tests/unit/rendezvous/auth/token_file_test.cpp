// The token file: read with its newline stripped; refused, with one line naming the source and
// the path, when group or others may read it, when it is missing, too short or not a file.

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ddp/error.hpp"
#include "rendezvous/auth/token_file.hpp"

using namespace ddp::rdzv::auth;
namespace fs = std::filesystem;

namespace {

struct TempFile {
  explicit TempFile(const std::string& text, mode_t mode) {
    path = fs::temp_directory_path() / ("ddp_token_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(counter++));
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
  }
  ~TempFile() { fs::remove(path); }
  fs::path path;
  static inline int counter = 0;
};

}  // namespace

TEST_CASE("an owner-only token file gives its secret without the newline", "[auth]") {
  TempFile file("s3cret-of-sixteen-bytes\n", 0600);
  CHECK(read_token_file(file.path, "--rdzv_conf token_file") == "s3cret-of-sixteen-bytes");
  TempFile read_only("s3cret-of-sixteen-bytes", 0400);
  CHECK(read_token_file(read_only.path, "DDPRUN_TOKEN_FILE") == "s3cret-of-sixteen-bytes");
}

TEST_CASE("a token file others may read is refused naming the flag, the path and the mode",
          "[auth]") {
  TempFile file("s3cret-of-sixteen-bytes\n", 0644);
  CHECK_THROWS_AS(read_token_file(file.path, "--rdzv_conf token_file"), ddp::ConfigError);
  CHECK_THROWS_WITH(read_token_file(file.path, "--rdzv_conf token_file"),
                    Catch::StartsWith("--rdzv_conf token_file=" + file.path.string()) &&
                        Catch::Contains("mode 0644") && Catch::Contains("chmod 600"));
  TempFile group_write("s3cret-of-sixteen-bytes\n", 0620);
  CHECK_THROWS_WITH(read_token_file(group_write.path, "DDPRUN_TOKEN_FILE"),
                    Catch::Contains("mode 0620"));
}

TEST_CASE("a missing, short or non-regular token file is refused", "[auth]") {
  CHECK_THROWS_WITH(read_token_file("/nonexistent/ddp-token", "DDPRUN_TOKEN_FILE"),
                    Catch::StartsWith("DDPRUN_TOKEN_FILE=/nonexistent/ddp-token: cannot open"));
  TempFile short_file("short\n", 0600);
  CHECK_THROWS_WITH(read_token_file(short_file.path, "--rdzv_conf token_file"),
                    Catch::Contains("secret of 5 bytes"));
  const fs::path dir = fs::temp_directory_path() / ("ddp_token_dir_" + std::to_string(::getpid()));
  fs::create_directory(dir);
  ::chmod(dir.c_str(), 0700);
  CHECK_THROWS_WITH(read_token_file(dir, "--rdzv_conf token_file"),
                    Catch::Contains("not a regular file"));
  fs::remove(dir);
}

TEST_CASE("job_secret prefers the rdzv_conf key over DDPRUN_TOKEN_FILE", "[auth]") {
  TempFile conf("from-the-rdzv-conf-key", 0600);
  TempFile env("from-the-environment-var", 0600);
  ::setenv("DDPRUN_TOKEN_FILE", env.path.c_str(), 1);
  CHECK(job_secret(conf.path.string()) == "from-the-rdzv-conf-key");
  CHECK(job_secret(std::nullopt) == "from-the-environment-var");
  ::unsetenv("DDPRUN_TOKEN_FILE");
  CHECK_FALSE(job_secret(std::nullopt).has_value());
}
