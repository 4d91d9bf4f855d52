// The order in which one backend's operations reach its library. A staged operation reaches it
// only once its input has come off the device, which depends on the caller's stream, not on the
// order of the calls: without this queue an operation called after it (a CPU tensor's, or another
// staged one on a stream that ran ahead) could start first on one rank and second on another. MPI
// matches collectives, and messages of one source and tag, by the order in which they start, so the
// ranks would then combine the wrong operations (wrong results where the sizes agree, a hang where
// they do not). Pure host code, unit-tested without a GPU; the staging wrapper uses it.
#pragma once

#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/backend.hpp"

namespace mcr::detail::device {

class StartOrder {
 public:
  /// Polled until true: the operation may go to the library. May throw; the error goes to the
  /// operation's owner. Empty: ready at once.
  using Ready = std::function<bool()>;
  /// Hands the operation to the library (Backend::start's answer: null when it completed there).
  using Start = std::function<std::unique_ptr<PendingOp>()>;

  /// One operation's place in the queue, kept by its owner.
  class Ticket {
   public:
    Ticket(Ready ready, Start start) : ready_(std::move(ready)), start_(std::move(start)) {}

   private:
    friend class StartOrder;
    Ready ready_;
    Start start_;
    bool left_queue_ = false;  // started, or failed with error_
    bool collected_ = false;
    std::unique_ptr<PendingOp> op_;
    std::exception_ptr error_;
  };

  /// Starts `start` at once where nothing waits, and says so; else starts nothing. The queue stays
  /// locked while it runs, so no operation can be queued ahead of it meanwhile.
  /// Raises the reason the order was lost, if it was (see cancel()).
  template <class F>
  bool start_if_idle(F&& start, std::unique_ptr<PendingOp>& op) {
    std::lock_guard lock(mutex_);
    throw_if_broken_locked();
    if (!waiting_.empty()) return false;
    op = std::forward<F>(start)();
    return true;
  }

  /// Queues an operation behind every waiting one. Call advance() to start what can start. Where
  /// the order was lost the ticket comes back failed with the reason.
  std::shared_ptr<Ticket> enqueue(Ready ready, Start start);

  /// Starts the waiting operations, first to last, while they are ready; stops at the first that
  /// is not. An operation whose Ready or Start throws leaves the queue with that error, and the
  /// order is lost from there (see cancel()).
  void advance();

  /// Whether `ticket`'s operation has been handed to the library; once it has, moves what Start
  /// returned into `op` (once: later calls return true and leave `op` alone). Rethrows the error
  /// its Ready or Start raised.
  bool collect(Ticket& ticket, std::unique_ptr<PendingOp>& op);

  /// Takes a waiting operation out without starting it (it timed out, or its owner is gone). No
  /// function of it runs after this returns. The order is then lost: the peers started it, so an
  /// operation behind it started here would be matched with it (wrong values where the sizes
  /// agree). Every operation behind it fails with the reason, and so does every later one. An
  /// operation that has left the queue is not affected.
  void cancel(Ticket& ticket) noexcept;

  /// Fails every waiting operation with `why` (their backend is going away) and takes them out.
  void close(const char* why) noexcept;

  /// True when no operation waits.
  bool idle();

  /// Raises the reason the order was lost (see cancel()), if it was.
  void throw_if_broken();

 private:
  /// Fails every waiting operation from position `from` on with `why`, and every later one.
  void break_order_from(std::size_t from, const std::string& why) noexcept;
  void throw_if_broken_locked() const;

  std::mutex mutex_;  // held while a Ready or Start runs
  std::deque<std::shared_ptr<Ticket>> waiting_;
  std::string broken_;  // why the order was lost; empty while it holds
};

}  // namespace mcr::detail::device
