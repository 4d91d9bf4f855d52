// The communication thread: issue in posted order, poll everything in flight, complete futures.
#include "comm_thread.hpp"

#include <stdexcept>
#include <string>

#include <mcr/errors.hpp>

namespace mcr::torch_ext {

CommThread& CommThread::instance() {
  // Never destroyed: a static destructor would run after Python finalised and after torch's own
  // statics; shutdown() (registered with Python's atexit) stops the thread instead.
  static CommThread* t = new CommThread();
  return *t;
}

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  if (thread_.joinable()) thread_.detach();
}

void CommThread::post(PostedOp op) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      auto err = std::make_exception_ptr(
          mcr::Error("mcr: the communication thread has shut down (mcr.torch.shutdown() or exit)"));
      op.complete(err);
      return;
    }
    queue_.push_back(Item{std::move(op), {}});
    queued_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

bool CommThread::post_task(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    queue_.push_back(Item{{}, std::move(task)});
    queued_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
  return true;
}

void CommThread::run_task(std::function<void()> task) {
  if (on_thread()) {
    throw std::logic_error("mcr: a blocking runtime call was made on the communication thread");
  }
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw mcr::Error("mcr: the communication thread has shut down");
    queue_.push_back(Item{{}, std::move(task)});
    queued_.store(true, std::memory_order_release);
  }
  cv_.notify_one();
}

void CommThread::shutdown(const std::function<void()>& at_exit) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || stopped_) return;
  }
  if (on_thread()) return;
  auto drain_and_exit = [this, &at_exit] {
    // Operations nobody waited for still complete (or time out) before the runtime goes away.
    while (!in_flight_.empty()) {
      if (!poll_in_flight()) std::this_thread::yield();
    }
    at_exit();
    std::lock_guard lock(mu_);
    stopping_ = true;
  };
  std::packaged_task<void()> task(drain_and_exit);
  auto done = task.get_future();
  run_task([&task] { task(); });
  done.get();
  thread_.join();
  std::lock_guard lock(mu_);
  stopped_ = true;
}

void CommThread::issue(PostedOp& op) {
  try {
    mcr::Work w = op.issue();
    auto deadline = std::chrono::steady_clock::now() + op.timeout;
    in_flight_.push_back(
        InFlight{std::move(w), std::move(op.issue), std::move(op.complete), deadline, op.timeout});
  } catch (...) {
    op.complete(std::current_exception());
  }
}

bool CommThread::poll_in_flight() {
  bool progressed = false;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    std::exception_ptr error;
    bool finished = false;
    try {
      finished = it->work.test();
      // Past the deadline: a short wait raises mcr's TimeoutError (naming op, sequence number and
      // backend) and aborts the communicator, exactly as a timed-out blocking wait would.
      if (!finished && now >= it->deadline) {
        it->work.wait(std::chrono::milliseconds(1));
        finished = true;
      }
    } catch (const mcr::TimeoutError& e) {
      // The runtime's message names the 1 ms of the wait above; report the operation's own limit.
      error = std::make_exception_ptr(mcr::TimeoutError(
          e.op() + " (sequence #" + std::to_string(e.sequence()) + ") on backend '" + e.backend() +
              "' did not complete within " + std::to_string(it->timeout.count()) +
              " ms; the communicator is aborted",
          e.op(), e.sequence(), e.backend()));
      finished = true;
    } catch (...) {
      error = std::current_exception();
      finished = true;
    }
    if (!finished) {
      ++it;
      continue;
    }
    auto complete = std::move(it->complete);
    auto owner = std::move(it->issue);  // buffers outlive the copy-back in complete()
    it = in_flight_.erase(it);
    complete(error);  // may post new operations (future callbacks): never under mu_
    progressed = true;
  }
  return progressed;
}

void CommThread::loop() {
  auto idle_since = std::chrono::steady_clock::now();
  for (;;) {
    std::deque<Item> batch;
    if (in_flight_.empty()) {
      // Training issues operations back to back: watch the queue for a short while before
      // sleeping, since a condition-variable wake-up costs more than a small all_reduce.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (!queued_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
    }
    {
      std::unique_lock lock(mu_);
      if (in_flight_.empty()) cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      queued_.store(false, std::memory_order_relaxed);
      if (stopping_ && queue_.empty() && in_flight_.empty()) return;
      batch.swap(queue_);
    }
    for (auto& item : batch) {
      if (item.op.issue) {
        issue(item.op);
      } else {
        item.task();
      }
    }
    {
      std::lock_guard lock(mu_);
      if (stopping_ && in_flight_.empty()) return;
    }
    const bool progressed = poll_in_flight() || !batch.empty();
    if (progressed) {
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    // Nothing moved. Every test() also drives MPI's nonblocking collectives (a large all_reduce
    // advances a segment per call), so poll on, yielding the core; after a quiet millisecond (a
    // peer still computing, or DDP's buckets waiting on the backward pass) back off to short
    // sleeps, or this thread takes the cores the computation needs.
    if (std::chrono::steady_clock::now() - idle_since < std::chrono::milliseconds(1)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace mcr::torch_ext
