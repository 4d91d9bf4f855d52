// The one thread that runs a backend instance's queued collectives, strictly in issue order: a
// gloo context must not run two collectives at once, and the issue order is the same on every
// rank, so running them in that order on every rank can never cross-match.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace mcr::detail {

class GlooWorker {
 public:
  /// A task runs once; `cancelled` is true when the worker shuts down before running it.
  using Task = std::function<void(bool cancelled)>;

  GlooWorker();
  /// Lets the running task finish, cancels the queued ones, joins the thread.
  ~GlooWorker();
  GlooWorker(const GlooWorker&) = delete;
  GlooWorker& operator=(const GlooWorker&) = delete;

  /// Queues `task`; `key` names it for run_if_next().
  void submit(Task task, const void* key = nullptr);
  /// Nothing queued and nothing running: the caller may run a collective itself without
  /// overtaking an earlier one.
  bool idle() const;
  /// Runs the task submitted with `key` in the calling thread, if it is the next to run and
  /// nothing runs now (so that no collective overtakes another); returns whether it ran.
  bool run_if_next(const void* key);

 private:
  struct Item {
    Task task;
    const void* key = nullptr;
  };
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mcr::detail
