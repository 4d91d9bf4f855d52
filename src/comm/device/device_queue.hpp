// Per-device CUDA resources shared by every NCCL communicator of the process.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <cuda_runtime_api.h>

#include "device/cuda_check.hpp"

namespace mcr::detail::device {

/// Makes `device` current for a scope and restores the caller's device afterwards, so the runtime
/// never changes which device the application's own CUDA calls go to.
class DeviceGuard {
 public:
  DeviceGuard(int device, const CallSite& site);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// The communication stream of one device, with a pool of completion events. All NCCL
/// communicators on a device share it: NCCL kernels of different communicators that run
/// concurrently on one GPU can hang each other (comm-notes §3.1.3), whereas one stream runs them in
/// issue order, which every rank agrees on under the communicator contract.
class DeviceQueue {
 public:
  /// The queue of `device`, created on first use (non-blocking, highest-priority stream).
  static std::shared_ptr<DeviceQueue> for_device(int device, const CallSite& site);
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  int device() const noexcept { return device_; }
  cudaStream_t stream() const noexcept { return stream_; }

  /// Makes the comm stream wait for everything enqueued so far on `caller` (event + stream wait).
  void order_after(cudaStream_t caller, const CallSite& site);

  /// A timing-free event for one operation's completion; give it back with release_event.
  cudaEvent_t acquire_event(const CallSite& site);
  void release_event(cudaEvent_t event) noexcept;

 private:
  DeviceQueue(int device, const CallSite& site);

  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // re-recorded per op: a stream wait captures the latest record
  std::mutex mutex_;
  std::vector<cudaEvent_t> free_events_;
};

/// A null stream handle means the legacy default stream of the current device.
inline cudaStream_t caller_stream(void* stream) noexcept {
  return stream != nullptr ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
}

}  // namespace mcr::detail::device
