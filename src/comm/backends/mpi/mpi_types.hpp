// Mapping of mcr dtypes and reduce ops to MPI, including user-defined ops for f16/bf16.
#pragma once

#include <mpi.h>

#include "mcr/types.hpp"

namespace mcr::detail {

MPI_Datatype mpi_datatype(DType t) noexcept;
/// The MPI op computing `op` on `t` (avg maps to a sum; the caller divides). Creates the user ops
/// for f16/bf16 on first use. Returns MPI_OP_NULL for combinations that are invalid.
MPI_Op mpi_op(ReduceOp op, DType t);
/// Frees the user-defined ops (before MPI_Finalize).
void free_mpi_user_ops() noexcept;

}  // namespace mcr::detail
