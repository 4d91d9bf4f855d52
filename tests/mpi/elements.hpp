// Host buffers and reference values for the multi-rank tests.
//
// Every value a test puts into a buffer is an integer chosen so that it, and every partial result
// of the reductions the tests run on it, is exactly representable in the element type (f16 holds
// integers up to 2048 exactly, bf16 up to 256, i8 up to 127). Expected results are therefore
// computed here in 64-bit integers, independently of the runtime, and compared exactly; only avg
// (a division) is compared with a tolerance of a few units in the last place.
//
// The f16/bf16 encodings below are written out by hand on purpose: they must not share code with
// the runtime's own conversions, which the tests check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mcr/comm.hpp"

namespace mcr::test {

/// A host buffer of `count` elements of `dtype`, 8-byte aligned, never with a null data pointer.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, std::size_t count);

  DType dtype() const noexcept { return dtype_; }
  std::size_t count() const noexcept { return count_; }
  void* data() noexcept { return storage_.data(); }
  const void* data() const noexcept { return storage_.data(); }

  /// The whole buffer as a tensor.
  Tensor tensor() noexcept { return {data(), count_, dtype_}; }
  /// Elements [offset, offset + n) as a tensor (computed here, not with Tensor::slice).
  Tensor slice(std::size_t offset, std::size_t n);

  /// Stores integer `value` at `index`: exact for the values the patterns below produce; integer
  /// types wrap around like the type's own arithmetic.
  void set(std::size_t index, std::int64_t value);
  /// The element as a double (floating types) or as an integer (integer types).
  double get_real(std::size_t index) const;
  std::int64_t get_int(std::size_t index) const;

 private:
  DType dtype_ = DType::u8;
  std::size_t count_ = 0;
  std::vector<std::uint64_t> storage_;
};

/// Value that a data-movement test puts at `index` of `rank`'s buffer: distinct across ranks and
/// neighbouring indices, exactly representable in `dtype`. For 8-byte types the rank also lands in
/// bits above 2^36, so a transfer that truncates elements to 4 bytes shows.
std::int64_t data_value(DType dtype, int rank, std::size_t index, int salt);
/// A value no data_value and no small reduction result ever takes: what untouched outputs hold.
std::int64_t sentinel_value(DType dtype);

/// Operand of reduction `op` over `size` ranks, chosen so that the result and every partial result
/// are exact in `dtype` (sums stay within +-120, products within 2^size), see the file comment.
std::int64_t reduce_operand(ReduceOp op, DType dtype, int rank, std::size_t index, int size,
                            int salt);
/// The reduction over ranks 0..size-1 of reduce_operand(op, dtype, rank, index, size, salt),
/// computed in 64-bit integers (wrapped to `dtype` by Buffer::set). For avg this is the sum; the
/// caller divides (see expected_avg).
std::int64_t reduce_reference(ReduceOp op, DType dtype, std::size_t index, int size, int salt);
/// avg's reference: the exact sum divided by the group size.
double expected_avg(DType dtype, std::size_t index, int size, int salt);

/// Fills buffer elements [offset, offset + n) with value(i) for i in [0, n).
template <class F>
void fill(Buffer& b, std::size_t offset, std::size_t n, F&& value) {
  for (std::size_t i = 0; i < n; ++i)
    b.set(offset + i, value(i));
}

/// Compares `got` elements [got_offset, got_offset + expected.count()) with `expected` exactly.
/// Empty when equal; otherwise how many differ and the first few (index, expected, got).
std::string compare_exact(const Buffer& got, std::size_t got_offset, const Buffer& expected);
/// As compare_exact, against real values, within `ulps` units in the last place of `got`'s dtype.
std::string compare_close(const Buffer& got, std::size_t got_offset,
                          std::span<const double> expected, double ulps);

/// Short text of element `index` of `b` ("12", "-3.5").
std::string element_text(const Buffer& b, std::size_t index);

}  // namespace mcr::test
