// Checked calls into the CUDA runtime. A failure becomes mcr::BackendError whose message names the
// call, file:line, the rank and operation, and the runtime's own error name and text. Shared by the
// NCCL backend, device staging and device memory.
#pragma once

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

namespace mcr::detail::device {

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
