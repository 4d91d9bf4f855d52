// Memory on an accelerator for programs built on mcr (benchmarks, tests, examples), so that they
// need no device runtime's headers and no build switch of their own. Present in every build: where
// the build has no CUDA support, or no device is visible, allocating on a CUDA device throws
// UnsupportedError naming the reason.
#pragma once

#include <cstddef>

#include "mcr/comm/types.hpp"

namespace mcr {

/// An owning allocation of `size()` bytes on one device (never on the CPU: use host memory there).
/// Copies are synchronous with respect to the host: when they return, the bytes have arrived.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates `bytes` (at least one byte is reserved, so data() is never null) on `device`.
  /// Throws InvalidArgument for a CPU device and UnsupportedError when the device is not available.
  DeviceBuffer(Device device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  Device device() const noexcept { return device_; }

  /// Copies `bytes` from host memory to [offset, offset + bytes) of this buffer.
  void copy_from_host(const void* src, std::size_t bytes, std::size_t offset = 0);
  /// Copies [offset, offset + bytes) of this buffer to host memory, after all work queued on the
  /// device has finished.
  void copy_to_host(void* dst, std::size_t bytes, std::size_t offset = 0) const;

 private:
  void check_range(std::size_t bytes, std::size_t offset, const char* what) const;

  void* data_ = nullptr;
  std::size_t size_ = 0;
  Device device_{};
};

/// Devices of `kind` this process can use: 1 for the CPU; for CUDA, the visible devices (0 when
/// the build has no CUDA support or no device is present).
int device_count(Device::Kind kind) noexcept;

/// Blocks until all work queued on `device` has finished; nothing to do for the CPU.
void synchronize(Device device);

}  // namespace mcr
