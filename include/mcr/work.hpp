// Work: the handle of an asynchronous operation.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "mcr/types.hpp"

namespace mcr {

namespace detail {
class WorkState;
}

class Work {
 public:
  /// An empty handle behaves as an already completed operation.
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) noexcept : state_(std::move(state)) {}

  /// Non-blocking: true once the operation has completed (outputs readable on the host, or, for a
  /// stream-ordered device operation, enqueued work finished). Raises the operation's error, if
  /// any.
  bool test();
  /// Blocks until completion, at most the operation's timeout (the per-call timeout, else the
  /// communicator's). While waiting, every backend with pending work is progressed, so waiting on
  /// one operation never starves another. Raises TimeoutError naming op, sequence number and
  /// backend.
  void wait();
  /// As wait(), with an explicit timeout for this wait.
  void wait(std::chrono::milliseconds timeout);
  /// Makes `stream` (a cudaStream_t) wait for the operation on the device, without blocking the
  /// host. For host-completed operations this is a host wait.
  void synchronize(void* stream);

  bool valid() const noexcept { return state_ != nullptr; }
  OpType op() const;
  std::uint64_t sequence() const;
  std::string_view backend() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace mcr
