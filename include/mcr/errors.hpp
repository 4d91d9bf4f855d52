// Exceptions raised by mcr. Every message names what went wrong precisely: the argument and its
// value, or the library call with file:line, rank and the library's own message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mcr {

/// Base of every exception mcr raises.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input detected before any communication started: names the argument, its value and the rule.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// A backend cannot run this operation/dtype/reduce-op/device combination.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

/// Ranks disagree on something that must be identical everywhere (rules, tuning table, group
/// layout).
class MismatchError : public Error {
 public:
  using Error::Error;
};

/// A call into an underlying library (MPI, Gloo, NCCL, CUDA, the TCP store) failed.
class BackendError : public Error {
 public:
  using Error::Error;
};

/// An operation did not complete within its timeout. The communicator that raised it is aborted:
/// its later operations fail fast instead of matching against a peer stuck in the timed-out one.
class TimeoutError : public Error {
 public:
  TimeoutError(std::string message, std::string op, std::uint64_t sequence, std::string backend)
      : Error(std::move(message)),
        op_(std::move(op)),
        sequence_(sequence),
        backend_(std::move(backend)) {}
  const std::string& op() const noexcept { return op_; }
  std::uint64_t sequence() const noexcept { return sequence_; }
  const std::string& backend() const noexcept { return backend_; }

 private:
  std::string op_;
  std::uint64_t sequence_;
  std::string backend_;
};

}  // namespace mcr
