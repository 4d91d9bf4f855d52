// The machine mcr runs on, described as a DeviceSpec so predict() can be checked against local
// measurements: the CPU (cores as compute units) or the local GPU (its catalog entry, with the SM
// count and L2 the driver reports).
#pragma once

#include "mcr/codesign/bench/cpu_info.hpp"
#include "mcr/codesign/bench/gpu_info.hpp"
#include "mcr/codesign/device.hpp"

namespace mcr::codesign::bench {

/// Name given to the detected CPU device.
inline constexpr const char* kLocalCpuName = "local-cpu";

/// Streaming copy bandwidth (read + write bytes per second, GB/s) over buffers much larger than the
/// last-level cache, using `threads` threads; about 0.1-0.3 s.
double measure_memory_bandwidth_gbs(std::size_t llc_bytes, int threads);

/// The CPU as a device. Peaks: fp32 = cores x GHz x FLOP/cycle; fp64 half of it; bf16 twice fp32
/// when AVX512_BF16 is present. Tiles follow OpenBLAS's per-thread work split, alignment tiers
/// start neutral (calibration fits them), caches and bandwidth as given. Throws
/// mcr::InvalidArgument if the CPU frequency is unknown.
DeviceSpec cpu_device_spec(const CpuInfo& cpu, double memory_bandwidth_gbs);

/// The catalog device matching `gpu` (by name), with compute_units and l2_bytes replaced by what
/// the driver reports. Throws mcr::InvalidArgument when the product is not in the catalog (pass
/// --device then).
DeviceSpec gpu_device_spec(const GpuInfo& gpu);

}  // namespace mcr::codesign::bench
