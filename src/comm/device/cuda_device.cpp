// Device support of a CUDA build: the calls behind DeviceBuffer, each checked (device/cuda_check).
#include <fmt/format.h>

#include "device/cuda_check.hpp"
#include "device/device_queue.hpp"
#include "device/device_runtime.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::device {

namespace {
constexpr CallSite kSite{-1, "device memory"};
}  // namespace

int count(Device::Kind kind) noexcept {
  if (kind != Device::Kind::cuda) return 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error so later queries report afresh
    return 0;
  }
  return n;
}

void require(Device device) {
  if (!device.is_cuda()) return;
  int n = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&n); status != cudaSuccess) {
    (void)cudaGetLastError();
    // The runtime's reason: a driver older than the runtime reads as "no device" otherwise, and
    // sends the user to CUDA_VISIBLE_DEVICES.
    throw UnsupportedError(
        fmt::format("device cuda: no CUDA device is visible to this process (cudaGetDeviceCount: "
                    "{}: {})",
                    cudaGetErrorName(status), cudaGetErrorString(status)));
  }
  if (n == 0) throw UnsupportedError("device cuda: no CUDA device is visible to this process");
  if (device.index < 0 || device.index >= n) {
    throw InvalidArgument(fmt::format("device {}: index out of range ({} CUDA device{} visible)",
                                      to_string(device), n, n == 1 ? "" : "s"));
  }
}

void* allocate(Device device, std::size_t bytes) {
  DeviceGuard guard(device.index, kSite);
  void* p = nullptr;
  MCR_CUDA_CHECK(kSite, cudaMalloc(&p, bytes));
  return p;
}

void release(Device device, void* data) noexcept {
  try {
    DeviceGuard guard(device.index, kSite);
    (void)cudaFree(data);
  } catch (
      ...) {  // NOLINT(bugprone-empty-catch): freeing must not throw; the device is lost anyway
  }
}

void copy_to_device(Device device, void* dst, const void* src, std::size_t bytes) {
  DeviceGuard guard(device.index, kSite);
  MCR_CUDA_CHECK(kSite, cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(Device device, void* dst, const void* src, std::size_t bytes) {
  DeviceGuard guard(device.index, kSite);
  MCR_CUDA_CHECK(kSite, cudaDeviceSynchronize());  // the bytes are final only after queued work
  MCR_CUDA_CHECK(kSite, cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void synchronize(Device device) {
  DeviceGuard guard(device.index, kSite);
  MCR_CUDA_CHECK(kSite, cudaDeviceSynchronize());
}

}  // namespace mcr::detail::device
