// detect_gpu through the CUDA runtime (built when the cuBLASLt runner is).
#include <cuda_runtime_api.h>

#include "mcr/gemmbench/gpu_info.hpp"

namespace mcr::codesign::bench {

std::optional<GpuInfo> detect_gpu(int index) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || index < 0 || index >= count) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return std::nullopt;
  GpuInfo info;
  info.index = index;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.l2_bytes = prop.l2CacheSize;
  info.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  int clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index) == cudaSuccess) {
    info.max_clock_mhz = clock_khz / 1000.0;
  }
  return info;
}

}  // namespace mcr::codesign::bench
