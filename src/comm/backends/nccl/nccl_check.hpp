// Checked calls into the CUDA runtime and NCCL. A failure becomes mcr::BackendError whose message
// names the call, file:line, the rank and operation, the library's own error string and, for NCCL,
// ncclGetLastError(), which carries the detail (peer, transport, ...) the result code lacks.
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace mcr::detail::nccl {

/// Who made a failing call: printed in every error so a log of many ranks stays readable.
struct CallSite {
  int rank = -1;
  std::string_view op;  ///< the operation ("all_reduce") or the phase ("init", "split")
};

/// "<call> failed at <file>:<line> (rank <r>, <op>): <name>: <text>[; last NCCL error: <last>]".
/// Pure formatting, kept apart from the throwing helpers so it can be tested on its own.
std::string format_call_error(std::string_view call, std::string_view file, int line,
                              const CallSite& site, std::string_view code_name,
                              std::string_view code_text, std::string_view last_error = {});

[[noreturn]] void throw_cuda_error(const char* call, const char* file, int line,
                                   const CallSite& site, cudaError_t status);
[[noreturn]] void throw_nccl_error(const char* call, const char* file, int line,
                                   const CallSite& site, ncclResult_t status, ncclComm_t comm);

/// The name of an ncclResult_t value ("ncclUnhandledCudaError"); ncclGetErrorString gives the text.
std::string_view nccl_result_name(ncclResult_t status) noexcept;

}  // namespace mcr::detail::nccl

/// Evaluates a CUDA runtime call once; throws BackendError describing it when it fails.
#define MCR_CUDA_CHECK(site, call)                                                                \
  do {                                                                                            \
    const cudaError_t mcr_cuda_status_ = (call);                                                  \
    if (mcr_cuda_status_ != cudaSuccess) {                                                        \
      ::mcr::detail::nccl::throw_cuda_error(#call, __FILE__, __LINE__, (site), mcr_cuda_status_); \
    }                                                                                             \
  } while (false)

/// Evaluates an NCCL call once; throws BackendError describing it (with ncclGetLastError(comm)).
#define MCR_NCCL_CHECK(site, comm, call)                                                         \
  do {                                                                                           \
    const ncclResult_t mcr_nccl_status_ = (call);                                                \
    if (mcr_nccl_status_ != ncclSuccess) {                                                       \
      ::mcr::detail::nccl::throw_nccl_error(#call, __FILE__, __LINE__, (site), mcr_nccl_status_, \
                                            (comm));                                             \
    }                                                                                            \
  } while (false)
