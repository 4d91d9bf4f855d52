// Element-wise reduction on the host, for every dtype and reduce op: the combiner used by backends
// that lack a native reduction for a type (MPI's f16/bf16, Gloo's bf16) and by avg's final scaling.
#pragma once

#include <cstddef>

#include "mcr/comm/types.hpp"

namespace mcr::detail {

/// inout[i] = inout[i] (op) in[i] for i < count. `op` must be valid for `dtype`; avg combines as
/// sum.
void local_reduce(ReduceOp op, DType dtype, void* inout, const void* in,
                  std::size_t count) noexcept;

/// data[i] /= divisor, for the floating types (the second half of avg = sum / group size).
void divide_in_place(DType dtype, void* data, std::size_t count, int divisor) noexcept;

/// Returns a function pointer `void(void* inout, const void* in, size_t count)` specialised for
/// (op, dtype), for callers that need a plain C callback (Gloo reduce functions, MPI user ops).
using ReduceFn = void (*)(void* inout, const void* in, std::size_t count);
ReduceFn reduce_function(ReduceOp op, DType dtype) noexcept;

}  // namespace mcr::detail
