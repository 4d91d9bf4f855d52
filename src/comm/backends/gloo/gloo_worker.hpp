// The threads that run a backend instance's queued collectives. They start them strictly in issue
// order, at most `threads` at a time. Each collective carries its own gloo tag (consecutive in
// issue order, hence equal on every rank), so collectives running side by side on one context
// never cross-match, as in torch's ProcessGroupGloo, whose worker threads share a context the same
// way. Starting in issue order keeps the earliest unfinished collective of every rank running, so
// no collective waits for a later one (docs/design.md, "Progress and deadlock freedom").
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mcr::detail {

class GlooWorker {
 public:
  /// A task runs once; `cancelled` is true when the worker shuts down before running it.
  using Task = std::function<void(bool cancelled)>;

  /// At most `threads` (>= 1) collectives run at once; the threads start when work first needs
  /// them, so an instance that never queues a collective has none.
  explicit GlooWorker(int threads);
  /// Lets the running tasks finish, cancels the queued ones, joins the threads.
  ~GlooWorker();
  GlooWorker(const GlooWorker&) = delete;
  GlooWorker& operator=(const GlooWorker&) = delete;

  /// Queues `task`; `key` names it for run_if_next().
  void submit(Task task, const void* key = nullptr);
  /// Runs `run` in the calling thread if nothing is queued and fewer than `threads` collectives
  /// run now (so it starts after every earlier one has started); returns whether it ran. An
  /// exception from `run` propagates, the slot freed.
  bool run_now_if_free(const std::function<void()>& run);
  /// Runs the task submitted with `key` in the calling thread, if it is the next to start and a
  /// slot is free; returns whether it ran.
  bool run_if_next(const void* key);

 private:
  struct Item {
    Task task;
    const void* key = nullptr;
  };
  void loop();
  /// Frees a slot taken by the caller (run_now_if_free, run_if_next) and wakes a thread for it.
  void release_slot();

  const int max_running_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  int running_ = 0;  // collectives running now, in the threads or in callers
  int waiting_ = 0;  // threads asleep in cv_
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace mcr::detail
