// Why the GPU tests cannot run here, for their skip message; empty when a CUDA device is present.
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace mcr_test {

inline std::string no_device_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later CUDA calls are not affected
    return fmt::format("no CUDA device (cudaGetDeviceCount: {})", cudaGetErrorName(status));
  }
  return count == 0 ? "no CUDA device (cudaGetDeviceCount found 0)" : "";
}

}  // namespace mcr_test
