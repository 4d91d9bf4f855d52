// Watchdog for operations that block inside a library call (a synchronous MPI collective cannot be
// interrupted): if one exceeds its timeout, the job is ended with a message naming the operation,
// its sequence number and backend, this rank and the peers that have not reached the operation,
// instead of hanging forever; it writes the flight record and the rank's MCR_LOG output first.
// Arming costs a few relaxed stores, two ordered ones and reads no clock: the watchdog thread
// times how long one arming stays up. The same thread publishes the progress of communicators
// with long-outstanding operations (flight_progress.cpp) and writes SIGUSR1-requested dumps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>
#include <thread>

namespace mcr::detail {

class FlightRecorder;

/// One arming as the watchdog thread read it.
struct ArmedOp {
  std::string_view op;
  std::string_view backend;
  std::uint64_t sequence = 0;
  std::int64_t timeout_ms = 0;
  const FlightRecorder* recorder = nullptr;  // the op's communicator, alive while armed
  std::chrono::nanoseconds armed_for{0};     // how long the watchdog has seen this arming up
};

class Watchdog {
 public:
  struct Options {
    /// How often the thread looks; 0 polls continuously (tests).
    std::chrono::nanoseconds tick = std::chrono::milliseconds(50);
    /// Beyond an op's own timeout, so that a library with its own timeout (Gloo) raises a
    /// catchable TimeoutError first.
    std::chrono::nanoseconds grace = std::chrono::seconds(2);
    /// The process's other periodic work: the flight clock, SIGUSR1 dumps, progress publication.
    bool process_duties = true;
    /// What happens when an arming outlives its timeout and grace; by default the job is ended.
    std::function<void(const ArmedOp&)> on_expired;
    /// Runs between the thread's read of the current token and its read of the arming's fields:
    /// tests widen that window with it, where a re-arming would race the read. Unset in use.
    std::function<void()> between_reads;
  };

  /// The process's watchdog (default options), made on first use. Inline, as arm() and disarm():
  /// every blocking call arms it.
  static Watchdog& instance() {
    static Watchdog w(Options{});
    return w;
  }
  explicit Watchdog(Options options);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void start();
  void stop() noexcept;
  void arm(std::string_view op, std::uint64_t sequence, std::string_view backend,
           std::chrono::milliseconds timeout, const FlightRecorder* recorder) noexcept {
    token_.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    op_.store(op.data(), std::memory_order_relaxed);
    op_size_.store(op.size(), std::memory_order_relaxed);
    backend_.store(backend.data(), std::memory_order_relaxed);
    backend_size_.store(backend.size(), std::memory_order_relaxed);
    sequence_.store(sequence, std::memory_order_relaxed);
    timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
    recorder_.store(recorder, std::memory_order_relaxed);
    token_.store(++next_token_, std::memory_order_release);
  }
  void disarm() noexcept { token_.store(0, std::memory_order_release); }
  /// Whether this process's current blocking call is under the watchdog already (armed from the
  /// thread that calls mcr, so this is read there).
  bool armed() const noexcept { return token_.load(std::memory_order_acquire) != 0; }

 private:
  void run();
  /// The current arming, read as a seqlock: false when there is none or when it changed while
  /// being read (its fields could then belong to two different armings).
  bool read_armed(std::uint64_t token, ArmedOp& out) const noexcept;

  Options options_;
  // The arming protocol is a seqlock whose sequence is token_: arm() first sets it to 0, then
  // writes the fields, then publishes a token used by no other arming. The watchdog reads the
  // token, the fields, and the token again; it acts only when both reads agree, so it never pairs
  // one operation's start with another's timeout.
  std::atomic<std::uint64_t> token_{0};  // 0 = disarmed or being armed
  std::uint64_t next_token_ = 0;         // used by the arming thread only
  std::atomic<const char*> op_{nullptr};
  std::atomic<std::size_t> op_size_{0};
  std::atomic<const char*> backend_{nullptr};
  std::atomic<std::size_t> backend_size_{0};
  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::int64_t> timeout_ms_{0};
  std::atomic<const FlightRecorder*> recorder_{nullptr};
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace mcr::detail
