// The machine mcr runs on, described as a DeviceSpec so predict() can be checked against local
// measurements: the CPU (cores as compute units) or the local GPU (its catalog entry, with the SM
// count and L2 the driver reports).
#pragma once

#include <cstdint>

#include "mcr/codesign/device.hpp"
#include "mcr/gemmbench/cpu_info.hpp"
#include "mcr/gemmbench/gpu_info.hpp"
#include "mcr/gemmbench/runner.hpp"

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

/// The quick peak probe: square fp32 SGEMMs of side n, one untimed call, then `repetitions` timed
/// calls; the fastest gives the achieved FLOP/s.
struct PeakProbePlan {
  std::int64_t n = 0;
  int repetitions = 0;
};

/// Chooses the probe for a CPU whose fp32 peak is guessed at `guessed_tflops`: the side n (a
/// multiple of 256 in [512, 4096]) whose call takes about `call_budget_s` at the guessed peak, so
/// packing and thread start-up vanish into the multiply while the probe stays well under a second,
/// and 3 repetitions. A guess <= 0 gives n = 1024. Pure.
PeakProbePlan peak_probe_plan(double guessed_tflops, double call_budget_s = 0.04);

struct PeakProbe {
  PeakProbePlan plan;
  double tflops = 0;   ///< 2 n^3 / fastest timed call
  double seconds = 0;  ///< wall time of the whole probe
  std::string runner;  ///< the runner's description
};

/// Runs `plan` on `runner` (fp32, one buffer set: the probe wants the BLAS's best rate).
/// Throws what GemmRunner::time throws.
PeakProbe probe_fp32_peak(GemmRunner& runner, const PeakProbePlan& plan);

/// Makes the probe's rate the device's fp32 peak: the other peaks keep their ratio to fp32,
/// peak_fraction becomes 1 (the measured rate is already an achieved one), and sources record
/// "measured", the probe size and the value. Throws mcr::InvalidArgument if probe.tflops <= 0 or
/// the device has no fp32 peak.
void apply_measured_peak(DeviceSpec& d, const PeakProbe& probe);

struct LocalCpuOptions {
  int threads = 0;         ///< BLAS threads (0: every usable core); fewer = that share of the CPU
  bool probe_peak = true;  ///< measure the peak (falls back to the formula without a BLAS)
};

/// This machine's CPU as a device: cpu_device_spec() with measured memory bandwidth, scaled to
/// `threads` cores, and (probe_peak) the fp32 peak measured by a quick SGEMM probe through the
/// CBLAS runner. Without a BLAS, or when the probe fails, the estimate stays and
/// sources["peak_tflops"] says why. Throws mcr::InvalidArgument as cpu_device_spec() does.
DeviceSpec local_cpu_device(const LocalCpuOptions& options);

/// The catalog device matching `gpu` (by name), with compute_units and l2_bytes replaced by what
/// the driver reports. Throws mcr::InvalidArgument when the product is not in the catalog (pass
/// --device then).
DeviceSpec gpu_device_spec(const GpuInfo& gpu);

}  // namespace mcr::codesign::bench
