#include "device/cuda_check.hpp"

#include <fmt/format.h>

#include "mcr/errors.hpp"

namespace mcr::detail::device {

std::string format_call_error(std::string_view call, std::string_view file, int line,
                              const CallSite& site, std::string_view code_name,
                              std::string_view code_text, std::string_view last_error) {
  std::string where = site.rank >= 0 ? fmt::format("rank {}", site.rank) : std::string("rank ?");
  if (!site.op.empty()) where += fmt::format(", {}", site.op);
  std::string message =
      fmt::format("{} failed at {}:{} ({}): {}: {}", call, file, line, where, code_name, code_text);
  if (!last_error.empty()) message += fmt::format("; last NCCL error: {}", last_error);
  return message;
}

void throw_cuda_error(const char* call, const char* file, int line, const CallSite& site,
                      cudaError_t status) {
  // Clear a non-sticky error so that it is not reported again by an unrelated later call.
  (void)cudaGetLastError();
  throw BackendError(format_call_error(call, file, line, site, cudaGetErrorName(status),
                                       cudaGetErrorString(status)));
}

}  // namespace mcr::detail::device
