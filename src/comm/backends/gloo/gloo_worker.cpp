#include "backends/gloo/gloo_worker.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace mcr::detail {

GlooWorker::GlooWorker(int threads) : max_running_(std::max(threads, 1)) {}

GlooWorker::~GlooWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void GlooWorker::submit(Task task, const void* key) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(task), key});
    // A thread per collective that could start now, up to the limit; started under the lock so
    // that the destructor never misses one.
    if (static_cast<std::size_t>(waiting_) < queue_.size() &&
        static_cast<int>(threads_.size()) < max_running_) {
      threads_.emplace_back([this] { loop(); });
    }
  }
  cv_.notify_one();
}

bool GlooWorker::run_now_if_free(const std::function<void()>& run) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || !queue_.empty() || running_ >= max_running_) return false;
    ++running_;
  }
  struct Release {
    GlooWorker* w;
    ~Release() { w->release_slot(); }
  } release{this};
  run();
  return true;
}

bool GlooWorker::run_if_next(const void* key) {
  Task task;
  {
    std::lock_guard lock(mu_);
    if (stop_ || queue_.empty() || queue_.front().key != key || running_ >= max_running_) {
      return false;
    }
    task = std::move(queue_.front().task);
    queue_.pop_front();
    ++running_;
  }
  task(false);  // a task reports its own errors through its state; it does not throw
  release_slot();
  return true;
}

void GlooWorker::release_slot() {
  {
    std::lock_guard lock(mu_);
    --running_;
  }
  cv_.notify_one();
}

void GlooWorker::loop() {
  ::pthread_setname_np(::pthread_self(), "mcr-gloo-coll");  // a name in debuggers; best effort
  std::unique_lock lock(mu_);
  for (;;) {
    ++waiting_;
    cv_.wait(lock, [this] { return stop_ || (!queue_.empty() && running_ < max_running_); });
    --waiting_;
    if (stop_) {
      // Peers have stopped issuing operations too (or will time out); running the rest could
      // only block, so every queued task learns that it was cancelled.
      std::deque<Item> left;
      left.swap(queue_);
      lock.unlock();
      for (auto& item : left)
        item.task(true);
      return;
    }
    Task task = std::move(queue_.front().task);
    queue_.pop_front();
    ++running_;
    lock.unlock();
    task(false);
    lock.lock();
    --running_;  // this thread takes the next queued collective itself
  }
}

}  // namespace mcr::detail
