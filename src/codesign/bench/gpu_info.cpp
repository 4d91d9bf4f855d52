#include "mcr/codesign/bench/gpu_info.hpp"

#include "mcr_build_config.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#if MCR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mcr::codesign::bench {

std::string catalog_name_for_gpu(std::string_view device_name) {
  std::string name(device_name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto has = [&](std::string_view part) { return name.find(part) != std::string::npos; };
  // Most specific first: "a100" contains "a10", "h100 pcie" must win over "h100".
  if (has("h200")) return "h200";
  if (has("h100") && has("pcie")) return "h100-pcie";
  if (has("h100")) return "h100-sxm";
  if (has("a100") && (has("80gb") || has("80 gb"))) return "a100-80gb";
  if (has("a100")) return "a100-40gb";
  if (has("b200")) return "b200";
  if (has("l40s")) return "l40s";
  if (has("v100")) return "v100-sxm2-32gb";
  if (has("mi300x")) return "mi300x";
  if (has("mi250x")) return "mi250x-gcd";
  // "NVIDIA A10" exactly, not A100/A10G-like names we cannot vouch for.
  if (name == "nvidia a10" || name == "a10") return "a10";
  return {};
}

#if MCR_HAVE_CUDA

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

#else

std::optional<GpuInfo> detect_gpu(int /*index*/) {
  return std::nullopt;
}

#endif

}  // namespace mcr::codesign::bench
