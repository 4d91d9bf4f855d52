#include "watchdog.hpp"

#include <cstdio>
#include <string>
#include <thread>

#include "flight_recorder.hpp"
#include "launch_hooks.hpp"
#include "state.hpp"

namespace mcr::detail {
namespace {
// Grace beyond the op's own timeout, so that a library with its own timeout (Gloo) raises a
// catchable TimeoutError first.
constexpr std::int64_t kGraceNs = 2'000'000'000;
// Progress publication period, in 50 ms ticks: an op outstanding for more than 1 s is published
// within 1.25 s of its issue.
constexpr int kPublishTicks = 5;
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
                   std::chrono::milliseconds timeout, const FlightRecorder* recorder) noexcept {
  op_ = op;
  recorder_ = recorder;
  backend_ = backend;
  sequence_ = sequence;
  timeout_ms_ = timeout.count();
  token_.store(++next_token_, std::memory_order_release);
}

void Watchdog::start() {
  if (running_.exchange(true)) return;
  install_flight_hooks();
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
  for (std::uint64_t tick = 1; running_.load(std::memory_order_relaxed); ++tick) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    advance_flight_clock();
    if (take_dump_request()) dump_flight_record_to_dir("SIGUSR1");
    if (tick % kPublishTicks == 0) publish_stuck_progress();
    const std::uint64_t token = token_.load(std::memory_order_acquire);
    if (token == 0) continue;
    if (token != seen) {  // a new arming: start timing it (50 ms resolution is plenty here)
      seen = token;
      seen_since_ns = now_ns();
      continue;
    }
    if (now_ns() - seen_since_ns < timeout_ms_ * 1'000'000 + kGraceNs) continue;
    // Still the same arming after its timeout and grace: the arming thread is blocked inside the
    // library, so the op's details and its communicator stay put.
    const std::string context =
        recorder_ != nullptr ? timeout_context(*recorder_, sequence_) : std::string();
    std::fprintf(
        stderr,
        "mcr: TimeoutError: %.*s (sequence #%llu) on backend '%.*s' blocked for more than its "
        "timeout of %lld ms inside the library%s; a blocked library call cannot be interrupted, "
        "so the job is aborted\n",
        static_cast<int>(op_.size()), op_.data(), static_cast<unsigned long long>(sequence_),
        static_cast<int>(backend_.size()), backend_.data(), static_cast<long long>(timeout_ms_),
        context.c_str());
    std::fflush(stderr);
    write_crash_reports("watchdog: an operation blocked inside the library beyond its timeout");
    abort_job(124);
  }
}

}  // namespace mcr::detail
