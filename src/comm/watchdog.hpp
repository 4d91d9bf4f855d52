// Watchdog for operations that block inside a library call (a synchronous MPI collective cannot be
// interrupted): if one exceeds its timeout, the job is ended with a message naming the operation,
// its sequence number and backend, this rank and the peers that have not reached the operation,
// instead of hanging forever; it writes the flight record and the rank's MCR_LOG output first.
// Arming costs a few plain stores and one release store and reads no clock: the watchdog thread
// times how long one arming stays up. The same thread publishes the progress of communicators
// with long-outstanding operations (flight_progress.cpp) and writes SIGUSR1-requested dumps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace mcr::detail {

class FlightRecorder;

class Watchdog {
 public:
  static Watchdog& instance();
  void start();
  void stop() noexcept;
  void arm(std::string_view op, std::uint64_t sequence, std::string_view backend,
           std::chrono::milliseconds timeout, const FlightRecorder* recorder) noexcept;
  void disarm() noexcept { token_.store(0, std::memory_order_release); }

 private:
  void run();
  std::atomic<std::uint64_t> token_{0};  // 0 = disarmed; else a number unique to one arming
  std::uint64_t next_token_ = 0;         // used by the arming thread only
  std::atomic<bool> running_{false};
  // Written before token_ (release) and read after it (acquire). A race with the next arming can
  // only make the watchdog read a newer op's details, never fire early: it restarts its clock on
  // every new token.
  std::string_view op_;
  std::string_view backend_;
  std::uint64_t sequence_ = 0;
  std::int64_t timeout_ms_ = 0;
  const FlightRecorder* recorder_ = nullptr;  // the armed op's communicator, alive while armed
  void* thread_ = nullptr;
};

}  // namespace mcr::detail
