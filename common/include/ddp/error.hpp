#pragma once
// The error types of ddprun and libddp. One policy (docs/errors.md): throw to abort an operation;
// each subclass names what the caller should do about it.

#include <stdexcept>
#include <string>

namespace ddp {

// Base of every error ddprun and libddp throw.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A deadline passed: retry, or raise the timeout. The message names the operation and the wait.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The peer or the link is gone (refused, reset, EOF): reconnect or re-rendezvous.
class IoError : public Error {
 public:
  using Error::Error;
};

// The rendezvous round was closed under us: restart the round.
class RendezvousClosedError : public Error {
 public:
  using Error::Error;
};

// Bad user input (a flag, an environment variable, a file): print it and exit 2.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A bug: an invariant that should hold did not.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace ddp
