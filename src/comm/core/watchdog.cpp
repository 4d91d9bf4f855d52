#include "core/watchdog.hpp"

#include <cstdio>
#include <string>

#include "core/state.hpp"
#include "observe/flight_recorder.hpp"
#include "runtime/launch_hooks.hpp"

namespace mcr::detail {
namespace {

// Progress publication period, in default ticks: an op outstanding for more than 1 s is published
// within 1.25 s of its issue.
constexpr int kPublishTicks = 5;

// The process watchdog's action: a blocked library call cannot be interrupted, so the job ends.
void report_and_abort(const ArmedOp& a) {
  const std::string context =
      a.recorder != nullptr ? timeout_context(*a.recorder, a.sequence) : std::string();
  std::fprintf(
      stderr,
      "mcr: TimeoutError: %.*s (sequence #%llu) on backend '%.*s' blocked for more than its "
      "timeout of %lld ms inside the library%s; a blocked library call cannot be interrupted, "
      "so the job is aborted\n",
      static_cast<int>(a.op.size()), a.op.data(), static_cast<unsigned long long>(a.sequence),
      static_cast<int>(a.backend.size()), a.backend.data(), static_cast<long long>(a.timeout_ms),
      context.c_str());
  std::fflush(stderr);
  write_crash_reports("watchdog: an operation blocked inside the library beyond its timeout");
  abort_job(124);
}

}  // namespace

Watchdog::Watchdog(Options options) : options_(std::move(options)) {
  if (!options_.on_expired) options_.on_expired = report_and_abort;
}

Watchdog::~Watchdog() {
  stop();
}

bool Watchdog::read_armed(std::uint64_t token, ArmedOp& out) const noexcept {
  out.op = {op_.load(std::memory_order_relaxed), op_size_.load(std::memory_order_relaxed)};
  out.backend = {backend_.load(std::memory_order_relaxed),
                 backend_size_.load(std::memory_order_relaxed)};
  out.sequence = sequence_.load(std::memory_order_relaxed);
  out.timeout_ms = timeout_ms_.load(std::memory_order_relaxed);
  out.recorder = recorder_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return token_.load(std::memory_order_relaxed) == token;
}

void Watchdog::start() {
  if (running_.exchange(true)) return;
  if (options_.process_duties) install_flight_hooks();
  thread_ = std::thread([this] { run(); });
}

void Watchdog::stop() noexcept {
  if (!running_.exchange(false)) return;
  thread_.join();
}

void Watchdog::run() {
  std::uint64_t seen = 0;
  Clock::time_point seen_since{};
  for (std::uint64_t tick = 1; running_.load(std::memory_order_relaxed); ++tick) {
    if (options_.tick.count() > 0) {
      std::this_thread::sleep_for(options_.tick);
    } else {
      std::this_thread::yield();
    }
    if (options_.process_duties) {
      advance_flight_clock();
      if (take_dump_request()) dump_flight_record_to_dir("SIGUSR1", DumpKind::snapshot);
      if (tick % kPublishTicks == 0) publish_stuck_progress();
    }
    const std::uint64_t token = token_.load(std::memory_order_acquire);
    if (token == 0) continue;
    if (token != seen) {  // a new arming: start timing it (one tick of resolution is plenty)
      seen = token;
      seen_since = Clock::now();
      continue;
    }
    if (options_.between_reads) options_.between_reads();
    ArmedOp armed;
    if (!read_armed(token, armed)) continue;  // re-armed meanwhile: the next look times it
    armed.armed_for = Clock::now() - seen_since;
    if (armed.armed_for < std::chrono::milliseconds(armed.timeout_ms) + options_.grace) continue;
    // Still the same arming after its timeout and grace: the arming thread is blocked inside the
    // library, so the op's details and its communicator stay put.
    options_.on_expired(armed);
    seen = 0;  // a hook that returns (tests) times the arming afresh
  }
}

}  // namespace mcr::detail
