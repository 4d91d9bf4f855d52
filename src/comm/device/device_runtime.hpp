// The few device-runtime calls that shared code needs (DeviceBuffer, the staging wrapper's entry
// points). Defined by device/cuda_device.cpp in CUDA builds and by device/no_device.cpp otherwise:
// the build picks the file, so no shared code carries a device #if.
#pragma once

#include <cstddef>
#include <memory>

#include "mcr/comm/types.hpp"

namespace mcr::detail {
class Backend;
}

namespace mcr::detail::device {

/// Devices of `kind` visible to this process (0 when the build has no support for it).
int count(Device::Kind kind) noexcept;
/// Throws UnsupportedError naming the reason when `device` cannot be used here.
void require(Device device);
void* allocate(Device device, std::size_t bytes);
void release(Device device, void* data) noexcept;
void copy_to_device(Device device, void* dst, const void* src, std::size_t bytes);
void copy_to_host(Device device, void* dst, const void* src, std::size_t bytes);
void synchronize(Device device);

/// Wraps a host-only backend so that it also accepts device tensors by staging them through pinned
/// host buffers. Operations the inner backend runs natively on device memory (CUDA-aware MPI) pass
/// through. Without device support in the build, the backend is returned unchanged.
std::unique_ptr<Backend> with_staging(std::unique_ptr<Backend> backend);
/// As with_staging when this process sees a device; otherwise the backend unchanged, so that a
/// host-only run pays no indirection on any call.
std::unique_ptr<Backend> with_staging_if_device(std::unique_ptr<Backend> backend);

}  // namespace mcr::detail::device
