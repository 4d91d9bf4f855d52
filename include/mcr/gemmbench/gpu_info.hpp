// The local GPU as the CUDA runtime reports it, and the catalog device it corresponds to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mcr::codesign::bench {

struct GpuInfo {
  int index = 0;
  std::string name;  ///< e.g. "NVIDIA H200"
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  double max_clock_mhz = 0;  ///< cudaDevAttrClockRate (peak SM clock)
  std::int64_t l2_bytes = 0;
  std::int64_t memory_bytes = 0;
};

/// Queries CUDA device `index`; nullopt without CUDA support, driver or device.
std::optional<GpuInfo> detect_gpu(int index = 0);

/// Catalog name for a CUDA device name ("NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" ->
/// "a100-80gb"); empty when the product is not in the catalog. Pure; exposed for tests.
std::string catalog_name_for_gpu(std::string_view device_name);

}  // namespace mcr::codesign::bench
