#include "backends/nccl/nccl_check.hpp"

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::nccl {

void throw_nccl_error(const char* call, const char* file, int line, const CallSite& site,
                      ncclResult_t status, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  const std::string more =
      last != nullptr && *last != '\0' ? fmt::format("last NCCL error: {}", last) : std::string();
  throw BackendError(format_call_error(call, file, line, site, nccl_result_name(status),
                                       ncclGetErrorString(status), more));
}

std::string_view nccl_result_name(ncclResult_t status) noexcept {
  switch (status) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(unknown)";
  }
}

}  // namespace mcr::detail::nccl
