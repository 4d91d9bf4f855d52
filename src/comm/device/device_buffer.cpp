// DeviceBuffer: validation and ownership; the device calls themselves are in device_runtime.hpp.
#include "mcr/comm/device_buffer.hpp"

#include <utility>

#include <fmt/format.h>

#include "device/device_runtime.hpp"
#include "mcr/errors.hpp"

namespace mcr {

DeviceBuffer::DeviceBuffer(Device device, std::size_t bytes) : size_(bytes), device_(device) {
  if (device.is_cpu()) {
    throw InvalidArgument("DeviceBuffer: device cpu is not an accelerator (use host memory)");
  }
  detail::device::require(device);
  data_ = detail::device::allocate(device, bytes == 0 ? 1 : bytes);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) detail::device::release(device_, data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) detail::device::release(device_, data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceBuffer::check_range(std::size_t bytes, std::size_t offset, const char* what) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw InvalidArgument(fmt::format("DeviceBuffer::{}: [{}, +{} B) lies outside the {} B buffer",
                                      what, offset, bytes, size_));
  }
}

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  check_range(bytes, offset, "copy_from_host");
  if (bytes == 0) return;
  detail::device::copy_to_device(device_, static_cast<std::byte*>(data_) + offset, src, bytes);
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range(bytes, offset, "copy_to_host");
  if (bytes == 0) return;
  detail::device::copy_to_host(device_, dst, static_cast<const std::byte*>(data_) + offset, bytes);
}

int device_count(Device::Kind kind) noexcept {
  return kind == Device::Kind::cpu ? 1 : detail::device::count(kind);
}

void synchronize(Device device) {
  if (device.is_cuda()) detail::device::synchronize(device);
}

}  // namespace mcr
