// Work: the handle of an asynchronous operation.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "mcr/comm/types.hpp"

namespace mcr {

namespace detail {
class WorkState;
}

/// The handle of an asynchronous operation. Copies share the operation.
///
/// What must stay valid: the operation's tensors (and the counts of the v-ops) until wait()
/// returns or test() returns true. After a TimeoutError the operation is abandoned, not undone:
/// queued Gloo work is skipped, but a running Gloo collective or an MPI request may still touch
/// the buffers (the communicator is aborted: a peer may still be inside the operation). An MPI
/// request cannot be recalled, and a peer that arrives later completes it even after the
/// communicator is gone, so keep the buffers valid until the process exits (the runtime keeps its
/// own buffers of such operations, and the PyTorch binding its tensors, for that long).
///
/// A handle keeps its communicator's backends alive, so it may outlive every Communicator copy
/// and still be waited on. Dropping the last copy before completion does not cancel the
/// operation: it completes in the background (progressed by later waits of this process, finished
/// off by later asynchronous operations of its communicator), and at the latest it is waited for
/// when its communicator is destroyed or finalize() runs. Its buffers must stay valid until then. A
/// failure of a dropped operation is printed on stderr ("... failed after its Work handle was
/// dropped"), and raised by finalize() when finalize() is what waits for it.
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
  /// Whether a thread that watches this operation may sleep until the completion signal (see
  /// set_completion_signal) instead of polling test(): true once it has completed or failed, and
  /// for an operation whose library reports its completion from a thread of its own (Gloo's, once
  /// test() has been called); false for those that advance or complete only when polled (MPI,
  /// device work, hier).
  bool signals_completion() const;
  /// A wait for this operation that a thread without the right to call mcr may make
  /// (docs/design.md, "Threads"): the returned function blocks in the library until the operation
  /// has completed or failed, or its timeout has passed, and touches nothing else of mcr; test() or
  /// wait(), by the thread that holds the right, then reports how it ended. It lets a binding's
  /// waiting thread be woken by the library itself while another thread keeps calling mcr. Empty
  /// where the library has no such wait (it progresses only when polled: MPI, device work, hier),
  /// where another operation needs this thread's host progress, and once the operation has
  /// finished. Offered for Gloo's sends and receives: the first wait claims Gloo's own (a later
  /// one, or a test() after it, sleeps until it ends).
  std::function<void()> library_wait() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

/// Sets the process's completion signal: `signal` is called, from a library thread, each time an
/// operation whose Work::signals_completion() is true completes or fails (spurious calls are
/// possible). It must be quick and must not call mcr. An empty function removes it. This lets a
/// progress thread sleep, waking on its own posts or on this signal, instead of polling.
void set_completion_signal(std::function<void()> signal);

}  // namespace mcr
