// Device support of a build without CUDA: no device is ever visible, allocation is refused with
// the reason, and host-only backends are used unwrapped.
#include <cstdlib>

#include "core/backend.hpp"
#include "device/device_runtime.hpp"
#include "mcr/errors.hpp"

namespace mcr::detail::device {

namespace {
[[noreturn]] void unsupported() {
  throw UnsupportedError("device cuda: this build of mcr has no CUDA support (MCR_WITH_CUDA=OFF)");
}
}  // namespace

int count(Device::Kind) noexcept {
  return 0;
}
void require(Device device) {
  if (device.is_cuda()) unsupported();
}
void* allocate(Device, std::size_t) {
  unsupported();
}
void release(Device, void*) noexcept {}
void copy_to_device(Device, void*, const void*, std::size_t) {
  unsupported();
}
void copy_to_host(Device, void*, const void*, std::size_t) {
  unsupported();
}
void synchronize(Device) {
  unsupported();
}

std::unique_ptr<Backend> with_staging(std::unique_ptr<Backend> backend) {
  return backend;
}
std::unique_ptr<Backend> with_staging_if_device(std::unique_ptr<Backend> backend) {
  return backend;
}

}  // namespace mcr::detail::device
