#include "mpi_types.hpp"

#include <array>

#include "local_reduce.hpp"
#include "mpi_check.hpp"

namespace mcr::detail {
namespace {

// MPI has no half-precision types: f16/bf16 travel as 16-bit words and reduce through user ops that
// widen to float, like NCCL and Gloo do.
template <ReduceOp Op, DType T>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  static const ReduceFn fn = reduce_function(Op, T);
  fn(inout, in, static_cast<std::size_t>(*len));
}

template <DType T>
MPI_User_function* user_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return &user_reduce<ReduceOp::sum, T>;
    case ReduceOp::prod:
      return &user_reduce<ReduceOp::prod, T>;
    case ReduceOp::min:
      return &user_reduce<ReduceOp::min, T>;
    case ReduceOp::max:
      return &user_reduce<ReduceOp::max, T>;
    default:
      return nullptr;
  }
}

// [dtype f16/bf16][reduce op]
std::array<std::array<MPI_Op, 8>, 2> user_ops = [] {
  std::array<std::array<MPI_Op, 8>, 2> a{};
  for (auto& row : a)
    row.fill(MPI_OP_NULL);
  return a;
}();

}  // namespace

MPI_Datatype mpi_datatype(DType t) noexcept {
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

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (!reduce_op_valid_for(op, t)) return MPI_OP_NULL;
  if (t == DType::f16 || t == DType::bf16) {
    auto& slot = user_ops[t == DType::f16 ? 0 : 1][static_cast<std::size_t>(op)];
    if (slot == MPI_OP_NULL) {
      MPI_User_function* fn = t == DType::f16 ? user_fn<DType::f16>(op) : user_fn<DType::bf16>(op);
      if (fn == nullptr) return MPI_OP_NULL;
      MCR_MPI_CHECK(MPI_Op_create(fn, /*commute=*/1, &slot));
    }
    return slot;
  }
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

void free_mpi_user_ops() noexcept {
  for (auto& row : user_ops) {
    for (auto& op : row) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
}

}  // namespace mcr::detail
