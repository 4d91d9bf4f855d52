// Mapping of mcr dtypes and reduce ops to MPI, including user-defined ops for f16/bf16. Inline:
// every MPI call maps its dtype (and a reduction its op), and only the user ops need a lookup.
#pragma once

#include <mpi.h>

#include "mcr/comm/types.hpp"

namespace mcr::detail {

inline MPI_Datatype mpi_datatype(DType t) noexcept {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i8:
      return MPI_INT8_T;
    case DType::u8:
      return MPI_UINT8_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

/// The user-defined op computing `op` on f16 or bf16 (widened to float), created on first use;
/// MPI_OP_NULL for ops it cannot compute.
MPI_Op mpi_user_op(ReduceOp op, DType t);

/// The MPI op computing `op` on `t` (avg maps to a sum; the caller divides). Creates the user ops
/// for f16/bf16 on first use. Returns MPI_OP_NULL for combinations that are invalid.
inline MPI_Op mpi_op(ReduceOp op, DType t) {
  if (!reduce_op_valid_for(op, t)) return MPI_OP_NULL;
  if (t == DType::f16 || t == DType::bf16) return mpi_user_op(op, t);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::band:
      return MPI_BAND;
    case ReduceOp::bor:
      return MPI_BOR;
    case ReduceOp::bxor:
      return MPI_BXOR;
  }
  return MPI_OP_NULL;
}

/// Frees the user-defined ops (before MPI_Finalize).
void free_mpi_user_ops() noexcept;

}  // namespace mcr::detail
