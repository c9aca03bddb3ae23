// The permission check is made on the opened descriptor (fstat), not on the path, so the file
// that was checked is the file that is read. "Readable only by its owner" follows ssh's rule for
// private keys: owned by this user and no bit for group or others, not even write.

#include "rendezvous/auth/token_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/unique_fd.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv::auth {

std::string read_token_file(const std::string& path, const std::string& source,
                            std::size_t min_bytes) {
  const auto fail = [&](const std::string& why) {
    return ConfigError(fmt::format("{}={}: {}", source, path, why));
  };
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw fail(fmt::format("cannot open the file: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw fail(fmt::format("cannot stat the file: {}", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw fail("not a regular file");
  if (st.st_uid != ::geteuid()) {
    throw fail(fmt::format("the file is owned by uid {}, not by this user (uid {})",
                           st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    throw fail(fmt::format("the file has mode {:04o}: group and others must have no access "
                           "(chmod 600 it)",
                           st.st_mode & 07777));
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretBytes + 2)) {
    throw fail(fmt::format("the file holds {} bytes; at most {} are read", st.st_size,
                           kMaxSecretBytes));
  }
  std::string secret(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd.get(), secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail(fmt::format("cannot read the file: {}", std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  secret.resize(got);
  secret.erase(secret.find_last_not_of(" \t\r\n") + 1);  // npos + 1: all of it
  if (secret.size() < min_bytes || secret.size() > kMaxSecretBytes) {
    throw fail(fmt::format("the file holds a secret of {} bytes; it needs {} to {} (e.g. "
                           "head -c 32 /dev/urandom | base64 > FILE)",
                           secret.size(), min_bytes, kMaxSecretBytes));
  }
  return secret;
}

std::optional<std::string> job_secret(const std::optional<std::string>& conf_value) {
  if (conf_value) return read_token_file(*conf_value, "--rdzv_conf token_file");
  const char* env = std::getenv("DDPRUN_TOKEN_FILE");
  if (env == nullptr || *env == '\0') return std::nullopt;
  return read_token_file(env, "DDPRUN_TOKEN_FILE");
}

}  // namespace ddp::rdzv::auth
