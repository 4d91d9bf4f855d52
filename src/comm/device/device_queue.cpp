#include "device/device_queue.hpp"

#include <map>

namespace mcr::detail::device {

DeviceGuard::DeviceGuard(int device, const CallSite& site) {
  MCR_CUDA_CHECK(site, cudaGetDevice(&previous_));
  if (previous_ != device) {
    MCR_CUDA_CHECK(site, cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) (void)cudaSetDevice(previous_);
}

std::shared_ptr<DeviceQueue> DeviceQueue::for_device(int device, const CallSite& site) {
  static std::mutex registry_mutex;
  static std::map<int, std::weak_ptr<DeviceQueue>> registry;
  std::lock_guard lock(registry_mutex);
  if (auto existing = registry[device].lock()) return existing;
  std::shared_ptr<DeviceQueue> queue(new DeviceQueue(device, site));
  registry[device] = queue;
  return queue;
}

DeviceQueue::DeviceQueue(int device, const CallSite& site) : device_(device) {
  DeviceGuard guard(device, site);
  int least = 0;
  int greatest = 0;
  MCR_CUDA_CHECK(site, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Non-blocking: no implicit synchronisation with the legacy default stream; ordering is by
  // events.
  MCR_CUDA_CHECK(site, cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
  MCR_CUDA_CHECK(site, cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

DeviceQueue::~DeviceQueue() {
  // Destructors must not throw; at process exit the runtime may already be unloading, so the
  // results are ignored.
  for (cudaEvent_t e : free_events_)
    (void)cudaEventDestroy(e);
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

void DeviceQueue::order_after(cudaStream_t caller, const CallSite& site) {
  std::lock_guard lock(mutex_);
  MCR_CUDA_CHECK(site, cudaEventRecord(ready_, caller));
  MCR_CUDA_CHECK(site, cudaStreamWaitEvent(stream_, ready_, 0));
}

cudaEvent_t DeviceQueue::acquire_event(const CallSite& site) {
  {
    std::lock_guard lock(mutex_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  MCR_CUDA_CHECK(site, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void DeviceQueue::release_event(cudaEvent_t event) noexcept {
  std::lock_guard lock(mutex_);
  free_events_.push_back(event);
}

}  // namespace mcr::detail::device
