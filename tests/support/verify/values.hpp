// Value patterns of the verification library and the reference results computed from them.
//
// Every pattern is exact in every dtype (see elements.hpp): data values stay within the integer
// range each type holds exactly (i8: +-63, u8: < 251, bf16: +-125, f16: +-1019, the others below
// 2^24), and reduction operands are chosen so that every partial result stays exact too. The
// references are computed in 64-bit integers from the same formulas, never by the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mcr/comm/types.hpp"

namespace mcr::test {

/// Value that a data-movement test puts at `index` of `rank`'s buffer: distinct across ranks and
/// neighbouring indices, exactly representable in `dtype`. For 8-byte types the rank also lands in
/// bits above 2^36, so a transfer that truncates elements to 4 bytes shows.
std::int64_t data_value(DType dtype, int rank, std::size_t index, int salt);
/// A value no data_value and no small reduction result ever takes: what untouched outputs hold.
std::int64_t sentinel_value(DType dtype);

/// Operand of reduction `op` over `size` ranks, chosen so that the result and every partial result
/// are exact in `dtype` (sums stay within +-120, products within 2^size; bitwise ops get full-width
/// random bit patterns).
std::int64_t reduce_operand(ReduceOp op, DType dtype, int rank, std::size_t index, int size,
                            int salt);
/// The reduction over ranks 0..size-1 of reduce_operand(op, dtype, rank, index, size, salt),
/// computed in 64-bit integers and wrapped to the width of integer dtypes. For avg this is the sum;
/// see expected_avg.
std::int64_t reduce_reference(ReduceOp op, DType dtype, std::size_t index, int size, int salt);
/// The same reduction over ranks 0..ranks-1 only: a partial result, which must be exact too.
std::int64_t reduce_prefix(ReduceOp op, DType dtype, std::size_t index, int size, int salt,
                           int ranks);
/// avg's reference: the exact sum divided by the group size.
double expected_avg(DType dtype, std::size_t index, int size, int salt);

/// Per-rank contribution of all_gather_v: uneven, and zero for every rank r with r % 3 == 1.
std::size_t gather_v_count(std::size_t base, int rank);
/// Elements rank `src` sends to rank `dst` in all_to_all_v. The symmetric variant (needed in place,
/// where send_counts == recv_counts) satisfies count(s, d) == count(d, s). Both include zeros.
std::size_t all_to_all_v_count(std::size_t base, int src, int dst, bool symmetric);

}  // namespace mcr::test
