// Arguments of one device operation for the host-side plan tests (NCCL plans, staging layouts).
#pragma once

#include <cstddef>

#include "core/backend.hpp"

namespace mcr_test {

/// Distinct non-null buffers: plans never dereference them, they only compare and offset them.
inline float g_in[64];
inline float g_out[64];

/// `count` elements of `t` from g_in to g_out on device cuda:0.
inline mcr::detail::OpArgs device_args(mcr::OpType op, mcr::DType t, std::size_t count) {
  mcr::detail::OpArgs a;
  a.op = op;
  a.dtype = t;
  a.count = count;
  a.device = mcr::Device::cuda(0);
  a.in = g_in;
  a.out = g_out;
  return a;
}

}  // namespace mcr_test
