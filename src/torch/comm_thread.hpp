// The communication thread: the one thread of the process that calls into mcr.
//
// mcr's threading contract (docs/design.md, "Threads") lets one thread at a time use a communicator
// and its Work handles, and MPI is initialised FUNNELED. torch calls a process group from the
// Python thread, from autograd threads and from future callbacks, so every mcr call (init, group
// creation, each operation, finalize) is handed to this thread, as torch-ucc and oneCCL's bindings
// do. The thread issues queued operations in the order they were posted (the order is what every
// rank must agree on), polls every operation in flight and completes it even when nobody waits.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include <mcr/work.hpp>

namespace mcr::torch_ext {

/// One asynchronous operation as the communication thread sees it.
struct PostedOp {
  /// Starts the operation (an mcr i* call) and returns its handle. Runs on the communication
  /// thread. Kept until the operation completed: its captures own the buffers the runtime reads and
  /// writes.
  std::function<mcr::Work()> issue;
  /// Runs on the communication thread once the operation completed (nullptr) or failed.
  std::function<void(std::exception_ptr)> complete;
  /// After this long the operation fails with mcr::TimeoutError. mcr enforces timeouts inside
  /// Work::wait and in Gloo; a polled MPI request needs the deadline kept here.
  std::chrono::milliseconds timeout{0};
};

class CommThread {
 public:
  static CommThread& instance();

  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  /// Queues an operation; returns at once. Safe from any thread, including a future callback that
  /// runs on the communication thread itself.
  void post(PostedOp op);

  /// Runs `task` on the communication thread without waiting for it. Returns false (and drops the
  /// task) once the thread has shut down.
  bool post_task(std::function<void()> task);

  /// Runs `fn` on the communication thread after everything posted before it has been issued, and
  /// returns its result (or rethrows its exception). Must not be called from the thread itself.
  template <class F>
  auto call(F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    std::packaged_task<R()> task(std::forward<F>(fn));
    auto result = task.get_future();
    run_task([&task] { task(); });
    return result.get();
  }

  /// Waits for every operation in flight, runs `at_exit` (mcr::finalize) on the thread and joins
  /// it. Later posts fail with an error. Idempotent.
  void shutdown(const std::function<void()>& at_exit);
  bool on_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  CommThread();
  ~CommThread();

  struct InFlight {
    mcr::Work work;
    std::function<mcr::Work()> issue;  // owns the operation's buffers
    std::function<void(std::exception_ptr)> complete;
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
  };
  struct Item {
    PostedOp op;                 // when op.issue is set
    std::function<void()> task;  // otherwise
  };

  void run_task(std::function<void()> task);
  void loop();
  void issue(PostedOp& op);
  bool poll_in_flight();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::atomic<bool> queued_{false};  // queue_ non-empty; read without the lock while spinning
  bool stopping_ = false;
  bool stopped_ = false;
  std::deque<InFlight> in_flight_;  // touched by the communication thread only
  std::thread thread_;
};

}  // namespace mcr::torch_ext
