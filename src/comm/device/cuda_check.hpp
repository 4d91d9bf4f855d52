// Checked calls into the CUDA runtime. A failure becomes mcr::BackendError whose message names the
// call, file:line, the rank and operation, and the runtime's own error name and text. Shared by the
// NCCL backend, device staging and device memory.
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "core/library_error.hpp"

namespace mcr::detail::device {

using detail::CallSite;
using detail::format_call_error;

[[noreturn]] void throw_cuda_error(const char* call, const char* file, int line,
                                   const CallSite& site, cudaError_t status);

}  // namespace mcr::detail::device

/// Evaluates a CUDA runtime call once; throws BackendError describing it when it fails.
#define MCR_CUDA_CHECK(site, call)                                               \
  do {                                                                           \
    const cudaError_t mcr_cuda_status_ = (call);                                 \
    if (mcr_cuda_status_ != cudaSuccess) {                                       \
      ::mcr::detail::device::throw_cuda_error(#call, __FILE__, __LINE__, (site), \
                                              mcr_cuda_status_);                 \
    }                                                                            \
  } while (false)
