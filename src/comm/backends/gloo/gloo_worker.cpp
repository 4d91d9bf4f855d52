#include "backends/gloo/gloo_worker.hpp"

#include <pthread.h>

namespace mcr::detail {

GlooWorker::GlooWorker() : thread_([this] { loop(); }) {}

GlooWorker::~GlooWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GlooWorker::submit(Task task, const void* key) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(task), key});
  }
  cv_.notify_one();
}

bool GlooWorker::run_if_next(const void* key) {
  Task task;
  {
    std::lock_guard lock(mu_);
    if (running_ || stop_ || queue_.empty() || queue_.front().key != key) return false;
    task = std::move(queue_.front().task);
    queue_.pop_front();
    running_ = true;  // the worker starts nothing until this one has finished
  }
  task(false);
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  cv_.notify_one();
  return true;
}

bool GlooWorker::idle() const {
  std::lock_guard lock(mu_);
  return queue_.empty() && !running_;
}

void GlooWorker::loop() {
  ::pthread_setname_np(::pthread_self(), "mcr-gloo-coll");  // a name in debuggers; best effort
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (!queue_.empty() && !running_); });
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
    running_ = true;
    lock.unlock();
    task(false);
    lock.lock();
    running_ = false;
  }
}

}  // namespace mcr::detail
