// The progress engine: every wait progresses every backend that needs host progress, and GPU
// backends that can block a device are fenced from each other (docs/design.md).
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/state.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail {
namespace {

// Read by library threads at every completion, set rarely: a shared copy under a short lock, so
// that the listener can be replaced while a completion calls the previous one.
struct CompletionListener {
  std::mutex mu;
  std::shared_ptr<const std::function<void()>> listener;
};

CompletionListener& completion_listener() {
  static auto* l = new CompletionListener();  // never destroyed: library threads may outlive main
  return *l;
}

}  // namespace

void set_completion_listener(std::function<void()> listener) {
  auto& l = completion_listener();
  auto next =
      listener ? std::make_shared<const std::function<void()>>(std::move(listener)) : nullptr;
  std::lock_guard lock(l.mu);
  l.listener = std::move(next);
}

void signal_operation_completed() noexcept {
  auto& l = completion_listener();
  std::shared_ptr<const std::function<void()>> f;
  {
    std::lock_guard lock(l.mu);
    f = l.listener;
  }
  if (!f) return;
  try {
    (*f)();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a listener must not throw; nothing to tell
  }
}

void Engine::register_backend(Backend* b) {
  if (b->needs_host_progress()) host_progress_backends_.push_back(b);
  if (b->composes()) {
    std::lock_guard lock(comms_mu_);
    composed_backends_.push_back(b);
    composed_count_.store(composed_backends_.size(), std::memory_order_relaxed);
  }
}

void Engine::unregister_backend(Backend* b) noexcept {
  std::erase(host_progress_backends_, b);
  if (b->composes()) {
    std::lock_guard lock(comms_mu_);
    std::erase(composed_backends_, b);
    composed_count_.store(composed_backends_.size(), std::memory_order_relaxed);
  }
}

void Engine::finish_composed_ops() {
  auto any_busy = [this] {
    std::lock_guard lock(comms_mu_);
    return std::any_of(composed_backends_.begin(), composed_backends_.end(),
                       [](const Backend* b) { return b->busy_composing(); });
  };
  // Bounded: every step in flight times out on its own (Work::test), which ends its operation.
  for (std::uint64_t spins = 0; any_busy(); ++spins) {
    progress_all();
    if (spins > 256) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Engine::progress_all() {
  if (host_pending_ == 0) return;
  for (Backend* b : host_progress_backends_)
    b->progress();
}

void Engine::op_started(const WorkState& w) noexcept {
  if (w.backend->needs_host_progress_on(w.device.kind)) ++host_pending_;
}

void Engine::op_finished(const WorkState& w) noexcept {
  if (w.backend->needs_host_progress_on(w.device.kind)) --host_pending_;
}

void Engine::track_device_op(const std::shared_ptr<WorkState>& w) {
  std::erase_if(device_ops_, [](const auto& op) { return op->done || op->failed; });
  device_ops_.push_back(w);
}

void Engine::fence_device(const Backend& b, Device device, std::chrono::milliseconds timeout) {
  // Copy: waiting may complete (and so erase) entries.
  auto ops = device_ops_;
  for (auto& op : ops) {
    if (op->done || op->failed || op->device != device || op->backend == &b) continue;
    try {
      // Within the op's own timeout, as its owner's wait() would: the caller's limit is another
      // operation's, shorter perhaps, and expiring this op aborts its communicator.
      op->wait_for(op->timeout.count() > 0 ? op->timeout : timeout);
    } catch (...) {  // NOLINT(bugprone-empty-catch)
      // That op failed, or timed out (which aborted its communicator and so stopped its
      // kernels): either way it no longer holds the device, and its error is kept for its own
      // waiter. This call goes on, as its peers do; raised here, it left them waiting for this
      // rank, with another communicator's error.
    }
  }
  std::erase_if(device_ops_, [](const auto& op) { return op->done || op->failed; });
}

void Engine::add_comm(CommState* c) {
  std::lock_guard lock(comms_mu_);
  comms_.push_back(c);
}

void Engine::remove_comm(CommState* c) noexcept {
  std::lock_guard lock(comms_mu_);
  std::erase(comms_, c);
}

std::vector<CommState*> Engine::live_comms() const {
  std::lock_guard lock(comms_mu_);
  return comms_;
}

std::exception_ptr Engine::drain_all(Clock::time_point deadline) noexcept {
  // Copied under the lock; draining takes none, as finalize() runs when no other thread uses mcr.
  std::vector<CommState*> comms;
  {
    std::lock_guard lock(comms_mu_);
    comms = comms_;
  }
  std::exception_ptr first;
  for (CommState* c : comms) {
    auto e = c->drain(deadline);
    if (!first) first = e;
  }
  return first;
}

}  // namespace mcr::detail
