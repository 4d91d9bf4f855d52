#include "watchdog.hpp"

#include <cstdio>
#include <thread>

#include "launch_hooks.hpp"
#include "state.hpp"

namespace mcr::detail {
namespace {
// Grace beyond the op's own timeout, so that a library with its own timeout (Gloo) raises a
// catchable TimeoutError first.
constexpr std::int64_t kGraceNs = 2'000'000'000;
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
}  // namespace

Watchdog& Watchdog::instance() {
  static Watchdog w;
  return w;
}

void Watchdog::arm(std::string_view op, std::uint64_t sequence, std::string_view backend,
                   std::chrono::milliseconds timeout) noexcept {
  op_ = op;
  backend_ = backend;
  sequence_ = sequence;
  timeout_ms_ = timeout.count();
  token_.store(++next_token_, std::memory_order_release);
}

void Watchdog::start() {
  if (running_.exchange(true)) return;
  thread_ = new std::thread([this] { run(); });
}

void Watchdog::stop() noexcept {
  if (!running_.exchange(false)) return;
  auto* t = static_cast<std::thread*>(thread_);
  t->join();
  delete t;
  thread_ = nullptr;
}

void Watchdog::run() {
  std::uint64_t seen = 0;
  std::int64_t seen_since_ns = 0;
  while (running_.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::uint64_t token = token_.load(std::memory_order_acquire);
    if (token == 0) continue;
    if (token != seen) {  // a new arming: start timing it (50 ms resolution is plenty here)
      seen = token;
      seen_since_ns = now_ns();
      continue;
    }
    if (now_ns() - seen_since_ns < timeout_ms_ * 1'000'000 + kGraceNs) continue;
    std::fprintf(
        stderr,
        "mcr: TimeoutError: %.*s (sequence #%llu) on backend '%.*s' blocked for more than its "
        "timeout of %lld ms inside the library; a blocked library call cannot be interrupted, so "
        "the job is aborted\n",
        static_cast<int>(op_.size()), op_.data(), static_cast<unsigned long long>(sequence_),
        static_cast<int>(backend_.size()), backend_.data(), static_cast<long long>(timeout_ms_));
    std::fflush(stderr);
    abort_job(124);
  }
}

}  // namespace mcr::detail
