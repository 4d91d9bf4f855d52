// Watchdog for operations that block inside a library call (a synchronous MPI collective cannot be
// interrupted): if one exceeds its timeout, the job is ended with a message naming the operation,
// its sequence number and backend, instead of hanging forever. Arming costs two atomic stores.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace mcr::detail {

class Watchdog {
 public:
  static Watchdog& instance();
  void start();
  void stop() noexcept;
  void arm(std::string_view op, std::uint64_t sequence, std::string_view backend,
           std::chrono::milliseconds timeout) noexcept;
  void disarm() noexcept { deadline_ns_.store(0, std::memory_order_release); }

 private:
  void run();
  std::atomic<std::int64_t> deadline_ns_{0};
  std::atomic<bool> running_{false};
  // Written before deadline_ns_ (release) and read after it (acquire).
  std::string_view op_;
  std::string_view backend_;
  std::uint64_t sequence_ = 0;
  std::int64_t timeout_ms_ = 0;
  void* thread_ = nullptr;
};

}  // namespace mcr::detail
