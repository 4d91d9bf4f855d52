// Element codec, host buffers and the result checker of the verification library.
//
// Every value a test puts into a buffer is an integer chosen so that it, and every partial result
// of the reductions the tests run on it, is exactly representable in the element type (f16 holds
// integers up to 2048 exactly, bf16 up to 256, i8 up to 127). Expected results are therefore
// computed in 64-bit integers, independently of the runtime, and compared exactly; only avg (a
// division) is compared with a tolerance of a few units in the last place.
//
// The f16/bf16 encodings in elements.cpp are written out by hand on purpose: they must not share
// code with the runtime's own conversions (mcr::Half, mcr::BFloat16), which the tests check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mcr/comm.hpp"

namespace mcr::test {

/// IEEE binary16 / bfloat16 bits of integer `v`; throws std::logic_error when `v` is not exactly
/// representable (a test bug: the value patterns must stay exact).
std::uint16_t f16_bits_of_integer(std::int64_t v);
std::uint16_t bf16_bits_of_integer(std::int64_t v);
/// The real value of binary16 / bfloat16 bits (subnormals, infinities and NaN included).
double f16_value(std::uint16_t bits);
double bf16_value(std::uint16_t bits);

/// Writes integer `value` as one element of `dtype` at `p`: exact for the values the patterns of
/// values.hpp produce; integer types wrap around like the type's own arithmetic.
void encode_element(DType dtype, std::int64_t value, void* p);
/// The element at `p` as a double (any type; i64 beyond 2^53 rounds).
double decode_real(DType dtype, const void* p);
/// The element at `p` as an integer (floating types truncate).
std::int64_t decode_int(DType dtype, const void* p);

/// A host buffer of `count` elements of `dtype`, 8-byte aligned, never with a null data pointer.
/// A few guard elements follow the last one: an operation that writes past the end of a buffer it
/// was given shows in guard_damage().
class Buffer {
 public:
  static constexpr std::size_t kGuardBytes = 16;

  Buffer() : Buffer(DType::u8, 0) {}
  Buffer(DType dtype, std::size_t count);

  DType dtype() const noexcept { return dtype_; }
  std::size_t count() const noexcept { return count_; }
  void* data() noexcept { return storage_.data(); }
  const void* data() const noexcept { return storage_.data(); }
  /// Bytes of the elements plus the guard: what a device mirror copies.
  std::size_t storage_bytes() const noexcept { return count_ * dtype_size(dtype_) + kGuardBytes; }

  /// The whole buffer as a tensor.
  Tensor tensor() noexcept { return {data(), count_, dtype_}; }
  /// Elements [offset, offset + n) as a tensor (computed here, not with Tensor::slice).
  Tensor slice(std::size_t offset, std::size_t n);

  void set(std::size_t index, std::int64_t value);
  double get_real(std::size_t index) const;
  std::int64_t get_int(std::size_t index) const;

  /// Empty while the guard after the last element is intact, else which guard bytes changed.
  std::string guard_damage() const;

 private:
  void* at(std::size_t index) const;

  DType dtype_ = DType::u8;
  std::size_t count_ = 0;
  std::vector<std::uint64_t> storage_;
};

/// Fills buffer elements [offset, offset + n) with value(i) for i in [0, n).
template <class F>
void fill(Buffer& b, std::size_t offset, std::size_t n, F&& value) {
  for (std::size_t i = 0; i < n; ++i)
    b.set(offset + i, value(i));
}

/// Compares `got` elements [got_offset, got_offset + expected.count()) with `expected` exactly.
/// Empty when equal; otherwise how many differ and the first few as "[index] expected E got G".
std::string compare_exact(const Buffer& got, std::size_t got_offset, const Buffer& expected);
/// As compare_exact, against real values, within `ulps` units in the last place of `got`'s dtype.
std::string compare_close(const Buffer& got, std::size_t got_offset,
                          std::span<const double> expected, double ulps);

/// Short text of element `index` of `b` ("12", "-3.5").
std::string element_text(const Buffer& b, std::size_t index);

}  // namespace mcr::test
