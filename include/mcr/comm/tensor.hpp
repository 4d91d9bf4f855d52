// Tensor: a non-owning view of a contiguous buffer (pointer, element count, dtype, device).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "mcr/comm/types.hpp"

namespace mcr {

class Tensor {
 public:
  Tensor() = default;
  /// A view of `count` elements of type `dtype` at `data` on `device`. `stream` (a cudaStream_t, or
  /// null for the device's default stream) orders device tensors; it must be null for CPU tensors.
  Tensor(void* data, std::size_t count, DType dtype, Device device = Device::cpu(),
         void* stream = nullptr) noexcept
      : data_(data), count_(count), dtype_(dtype), device_(device), stream_(stream) {}

  template <class T>
  Tensor(std::span<T> s) noexcept  // NOLINT(google-explicit-constructor): a span is a view too
      : Tensor(const_cast<std::remove_const_t<T>*>(s.data()), s.size(), dtype_of_v<T>) {}
  template <class T>
  Tensor(std::vector<T>& v) noexcept  // NOLINT(google-explicit-constructor)
      : Tensor(std::span<T>(v)) {}

  void* data() const noexcept { return data_; }
  std::size_t count() const noexcept { return count_; }
  DType dtype() const noexcept { return dtype_; }
  Device device() const noexcept { return device_; }
  void* stream() const noexcept { return stream_; }
  std::size_t element_size() const noexcept { return dtype_size(dtype_); }
  std::size_t nbytes() const noexcept { return count_ * dtype_size(dtype_); }
  bool empty() const noexcept { return count_ == 0; }

  /// Elements [offset, offset + count) of this tensor. Throws InvalidArgument when out of range.
  Tensor slice(std::size_t offset, std::size_t count) const;

 private:
  void* data_ = nullptr;
  std::size_t count_ = 0;
  DType dtype_ = DType::f32;
  Device device_{};
  void* stream_ = nullptr;
};

}  // namespace mcr
