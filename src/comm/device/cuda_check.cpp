#include "device/cuda_check.hpp"

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::device {

void throw_cuda_error(const char* call, const char* file, int line, const CallSite& site,
                      cudaError_t status) {
  // Clear a non-sticky error so that it is not reported again by an unrelated later call.
  (void)cudaGetLastError();
  throw BackendError(format_call_error(call, file, line, site, cudaGetErrorName(status),
                                       cudaGetErrorString(status)));
}

}  // namespace mcr::detail::device
