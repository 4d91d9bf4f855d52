// Checked calls into NCCL (CUDA runtime calls: device/cuda_check.hpp). A failure becomes
// mcr::BackendError whose message names the call, file:line, the rank and operation, the library's
// own error string and, for NCCL, ncclGetLastError(), which carries the detail (peer, transport,
// ...) the result code lacks.
#pragma once

#include <string>
#include <string_view>

#include <nccl.h>

#include "device/cuda_check.hpp"

namespace mcr::detail::nccl {

using device::CallSite;
using device::format_call_error;

[[noreturn]] void throw_nccl_error(const char* call, const char* file, int line,
                                   const CallSite& site, ncclResult_t status, ncclComm_t comm);

/// The name of an ncclResult_t value ("ncclUnhandledCudaError"); ncclGetErrorString gives the text.
std::string_view nccl_result_name(ncclResult_t status) noexcept;

}  // namespace mcr::detail::nccl

/// Evaluates an NCCL call once; throws BackendError describing it (with ncclGetLastError(comm)).
#define MCR_NCCL_CHECK(site, comm, call)                                                         \
  do {                                                                                           \
    const ncclResult_t mcr_nccl_status_ = (call);                                                \
    if (mcr_nccl_status_ != ncclSuccess) {                                                       \
      ::mcr::detail::nccl::throw_nccl_error(#call, __FILE__, __LINE__, (site), mcr_nccl_status_, \
                                            (comm));                                             \
    }                                                                                            \
  } while (false)
