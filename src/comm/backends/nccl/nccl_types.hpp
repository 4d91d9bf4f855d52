// What NCCL can do, as data: element-type and reduction mappings and the capability table. Pure
// host code, so it is unit-tested on machines without a GPU.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nccl.h>

#include "core/backend.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::detail::nccl {

/// Every mcr element type has an NCCL counterpart of the same width and meaning.
ncclDataType_t to_nccl(DType dtype) noexcept;

/// sum, prod, min, max and avg map onto NCCL's built-in operators; bitwise operators have none.
std::optional<ncclRedOp_t> to_nccl(ReduceOp op) noexcept;

/// How the NCCL backend runs an operation, or why it cannot. NCCL only moves device memory; the
/// collectives NCCL lacks (all_to_all(v), gather, scatter, all_gather_v) are grouped send/recv.
Support nccl_support(OpType op, DType dtype, ReduceOp reduce, Device::Kind device) noexcept;

}  // namespace mcr::detail::nccl

namespace mcr::detail::nccl {

/// Why NCCL cannot run in this process, from what cudaGetDeviceCount reported (`status_name` empty
/// when it succeeded) and how many ranks share this node; empty when it can.
std::string unusable_reason_for(std::string_view status_name, std::string_view status_text,
                                int device_count, int local_size);

}  // namespace mcr::detail::nccl
