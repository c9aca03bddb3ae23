// One munge context per call: a context holds the socket path and little else, and the calls
// are a handful per agent connection. munged refuses a credential it decoded before (its replay
// cache), so a credential captured on the wire opens nothing even against the challenge it was
// made for; our payload check makes it useless against any other challenge too.

#include "rendezvous/auth/munge_credential.hpp"

#include <munge.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/unique_fd.hpp"
#include "ddp/error.hpp"

namespace ddp::rdzv::auth {
namespace {

// libmunge's compiled-in default (Debian's munge: --socket's default in munged --help).
constexpr const char* kDefaultMungeSocket = "/run/munge/munge.socket.2";

struct ContextFree {
  void operator()(munge_ctx_t ctx) const { munge_ctx_destroy(ctx); }
};
using Context = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, ContextFree>;

Context context_for(const std::string& socket) {
  Context ctx(munge_ctx_create());
  if (!ctx) throw InternalError("munge_ctx_create failed: out of memory");
  if (!socket.empty() && munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
    throw InternalError(fmt::format("munge: cannot use socket {}", socket));
  }
  return ctx;
}

std::string describe(const std::string& socket) {
  return socket.empty() ? std::string("munged (libmunge's default socket)")
                        : fmt::format("munged at {}", socket);
}

std::string error_of(munge_ctx_t ctx, munge_err_t error) {
  const char* detail = munge_ctx_strerror(ctx);
  return detail != nullptr ? detail : munge_strerror(error);
}

}  // namespace

std::string munge_encode(const std::string& socket, std::string_view payload) {
  const Context ctx = context_for(socket);
  // Only this user's processes may decode it (the stores of our job run as us).
  munge_ctx_set(ctx.get(), MUNGE_OPT_UID_RESTRICTION, ::geteuid());
  char* credential = nullptr;
  const munge_err_t error = munge_encode(&credential, ctx.get(), payload.data(),
                                         static_cast<int>(payload.size()));
  if (error != EMUNGE_SUCCESS) {
    std::free(credential);
    throw IoError(fmt::format("{} refused to make a credential: {}", describe(socket),
                              error_of(ctx.get(), error)));
  }
  std::string out(credential);
  std::free(credential);
  return out;
}

std::optional<std::string> munge_refusal(const std::string& socket, const std::string& credential,
                                         std::string_view payload, uid_t uid) {
  const Context ctx = context_for(socket);
  void* data = nullptr;
  int length = 0;
  uid_t from_uid = 0;
  gid_t from_gid = 0;
  const munge_err_t error =
      munge_decode(credential.c_str(), ctx.get(), &data, &length, &from_uid, &from_gid);
  const std::string decoded = data != nullptr ? std::string(static_cast<const char*>(data),
                                                            static_cast<std::size_t>(length))
                                              : std::string();
  std::free(data);  // allocated even for some refusals (a replay)
  if (error != EMUNGE_SUCCESS) {
    return fmt::format("a munge credential {} refused: {}", describe(socket),
                       error_of(ctx.get(), error));
  }
  if (from_uid != uid) {
    return fmt::format("a munge credential of uid {}, not of the job's user (uid {})", from_uid,
                       uid);
  }
  if (decoded != payload) {
    return "a munge credential over another payload (another challenge or run id)";
  }
  return std::nullopt;
}

MungeCheck munge_check_for(const Credentials& credentials) {
  return [socket = credentials.munge_socket.value_or(""), uid = ::geteuid()](
             const std::string& credential, std::string_view payload) {
    return munge_refusal(socket, credential, payload, uid);
  };
}

std::optional<std::string> munge_unavailable(const std::string& socket) {
  // libmunge retries a socket that refuses for seconds: a machine without munged (the common
  // case off SLURM) is told at once by one connect.
  const std::string path = socket.empty() ? std::string(kDefaultMungeSocket) : socket;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) return fmt::format("socket path {} is too long", path);
  std::copy(path.begin(), path.end(), address.sun_path);
  const UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return fmt::format("no munged answers at {}: {}", path, std::strerror(errno));
  }
  try {
    (void)munge_encode(socket, "");
    return std::nullopt;
  } catch (const Error& e) {
    return std::string(e.what());
  }
}

}  // namespace ddp::rdzv::auth
