#include "backends/nccl/nccl_types.hpp"

#include <fmt/format.h>

namespace mcr::detail::nccl {

ncclDataType_t to_nccl(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i8:
      return ncclInt8;
    case DType::u8:
      return ncclUint8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  return ncclUint8;  // unreachable: every enumerator is handled above
}

std::optional<ncclRedOp_t> to_nccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::prod:
      return ncclProd;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::band:
    case ReduceOp::bor:
    case ReduceOp::bxor:
      return std::nullopt;
  }
  return std::nullopt;
}

namespace {

constexpr std::string_view kHowNative = "native";
constexpr std::string_view kHowGrouped = "grouped send/recv";
constexpr std::string_view kHowBarrier = "1-element all_reduce";

std::string_view how_for(OpType op) noexcept {
  switch (op) {
    case OpType::all_to_all:
    case OpType::all_to_all_v:
    case OpType::gather:
    case OpType::scatter:
    case OpType::all_gather_v:
      return kHowGrouped;
    case OpType::barrier:
      return kHowBarrier;
    default:
      return kHowNative;
  }
}

}  // namespace

Support nccl_support(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) noexcept {
  if (device != Device::Kind::cuda) {
    return Support::no("NCCL moves device memory only; CPU tensors need MPI or Gloo");
  }
  if (is_reduction(op)) {
    if (!to_nccl(reduce)) {
      return Support::no(
          "NCCL has no bitwise reductions (its operators: sum, prod, min, max, avg)");
    }
    if (!reduce_op_valid_for(reduce, dtype)) {
      return Support::no("avg is defined for floating types only (an integer mean would truncate)");
    }
  }
  return Support::yes(how_for(op));
}

}  // namespace mcr::detail::nccl

namespace mcr::detail::nccl {

std::string unusable_reason_for(std::string_view status_name, std::string_view status_text,
                                int device_count, int local_size) {
  if (!status_name.empty()) {
    return fmt::format("no usable CUDA device: cudaGetDeviceCount returned {} ({})", status_name,
                       status_text);
  }
  if (device_count <= 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  if (local_size > device_count) {
    // NCCL refuses two ranks of one communicator on the same GPU ("duplicate GPU").
    return fmt::format(
        "{} ranks on this node share {} CUDA device(s); NCCL needs a distinct device per rank "
        "(device tensors still go through staged MPI/Gloo)",
        local_size, device_count);
  }
  return {};
}

}  // namespace mcr::detail::nccl
