#include "mpi_types.hpp"

#include <array>

#include "core/local_reduce.hpp"
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

MPI_Op mpi_user_op(ReduceOp op, DType t) {
  auto& slot = user_ops[t == DType::f16 ? 0 : 1][static_cast<std::size_t>(op)];
  if (slot == MPI_OP_NULL) {
    MPI_User_function* fn = t == DType::f16 ? user_fn<DType::f16>(op) : user_fn<DType::bf16>(op);
    if (fn == nullptr) return MPI_OP_NULL;
    MCR_MPI_CHECK(MPI_Op_create(fn, /*commute=*/1, &slot));
  }
  return slot;
}

void free_mpi_user_ops() noexcept {
  for (auto& row : user_ops) {
    for (auto& op : row) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
}

}  // namespace mcr::detail
