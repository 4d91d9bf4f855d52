#include "mcr/gemmbench/local_device.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mcr/errors.hpp"

namespace mcr::codesign::bench {

double measure_memory_bandwidth_gbs(std::size_t llc_bytes, int threads) {
  threads = std::max(1, threads);
  // 4x the LLC per buffer (at least 64 MiB) so that nearly every byte comes from DRAM.
  const std::size_t bytes = std::max<std::size_t>(64u << 20, 4 * llc_bytes);
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const std::size_t chunk = bytes / static_cast<std::size_t>(threads);
  auto copy_all = [&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t off = chunk * static_cast<std::size_t>(t);
        std::memcpy(dst.data() + off, src.data() + off, chunk);
      });
    }
    for (auto& th : pool)
      th.join();
  };
  copy_all();  // first touch of dst's pages
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    copy_all();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(chunk * static_cast<std::size_t>(threads)) / s);
  }
  return best / 1e9;
}

DeviceSpec cpu_device_spec(const CpuInfo& cpu, double memory_bandwidth_gbs) {
  if (!(cpu.freq_ghz > 0)) {
    throw InvalidArgument(
        "local CPU: the clock frequency could not be read from sysfs or /proc/cpuinfo, so its peak "
        "is unknown; describe the CPU in a device file and name it in request.device");
  }
  DeviceSpec d;
  d.name = kLocalCpuName;
  d.description = fmt::format("{} ({} cores, {}-bit SIMD, {}-bit FMA datapath)", cpu.model_name,
                              cpu.cores, cpu.simd_bits, cpu.fma_datapath_bits());
  d.vendor = "cpu";
  d.arch = fmt::format("{} family {}", cpu.vendor, cpu.family);
  d.compute_units = cpu.cores;
  d.clock_mhz = cpu.freq_ghz * 1000.0;
  const double fp32 = cpu.fp32_peak_tflops();
  d.peak_tflops[DType::fp32] = fp32;
  d.peak_tflops[DType::fp64] = fp32 / 2.0;
  if (cpu.avx512_bf16) d.peak_tflops[DType::bf16] = 2.0 * fp32;  // VDPBF16PS: 2 products per lane
  d.memory_bandwidth_gbs = memory_bandwidth_gbs;
  d.l2_bytes = static_cast<double>(cpu.llc_bytes());
  // A cache line (= one AVX-512 vector): below it, rows straddle lines and vector loads split.
  d.alignment_bytes = 64;
  // OpenBLAS gives each thread a contiguous block of C; these are the block shapes the model
  // chooses among (one "tile" per core and wave). As on a GPU, a smaller block reuses each packed
  // panel for fewer products, so it runs at a lower rate; the starting rates are guesses that
  // calibration fits.
  d.tiles = {{256, 256, 1.0}, {128, 128, 0.9}, {64, 64, 0.8}, {32, 32, 0.7}};
  d.efficiency.peak_fraction = 0.8;
  d.efficiency.alignment_tiers = {{64, 1.0}, {32, 1.0}, {16, 1.0}, {8, 1.0}, {4, 1.0}};
  d.efficiency.k_overhead = 32;
  d.efficiency.memory_efficiency = 0.8;
  d.efficiency.launch_overhead_s = 2e-6;
  d.efficiency.latency_floor_s = 1e-6;
  d.sources["compute_units"] = "sched_getaffinity CPU count";
  d.sources["clock_mhz"] = cpu.freq_source;
  d.sources["peak_tflops.fp32"] =
      fmt::format("cores x GHz x {} FLOP/cycle (2 FMA pipes x {}-bit datapath / 32 x 2)",
                  cpu.fp32_flop_per_cycle(), cpu.fma_datapath_bits());
  d.sources["memory_bandwidth_gbs"] = "measured: multi-threaded memcpy, 4x LLC buffers";
  d.sources["l2_bytes"] = "last-level cache from /sys/devices/system/cpu/cpu0/cache";
  d.validate();
  return d;
}

DeviceSpec local_cpu_device(const LocalCpuOptions& options) {
  const auto cpu = detect_cpu();
  // More BLAS threads than cores add no compute units.
  const int threads = options.threads > 0 ? std::min(options.threads, cpu.cores) : cpu.cores;
  auto spec = cpu_device_spec(
      cpu,
      measure_memory_bandwidth_gbs(static_cast<std::size_t>(cpu.llc_bytes_for(threads)), threads));
  if (threads != cpu.cores) {
    // The BLAS runs on `threads` cores: the device is that share of the CPU.
    const double share = static_cast<double>(threads) / cpu.cores;
    spec.compute_units = threads;
    for (auto& [dtype, peak] : spec.peak_tflops)
      peak *= share;
    spec.description += fmt::format(", {} of them used", threads);
  }
  if (!options.probe_peak) {
    spec.sources["peak_tflops"] = "estimated from CPU facts (peak probe skipped)";
    return spec;
  }
  if (!cblas_available()) {
    spec.sources["peak_tflops"] = "estimated from CPU facts (no BLAS in this build to probe with)";
    return spec;
  }
  try {
    auto runner = make_cblas_runner(threads);
    const auto probe = probe_fp32_peak(*runner, peak_probe_plan(spec.peak_for(DType::fp32)));
    apply_measured_peak(spec, probe);
  } catch (const UnsupportedError& e) {
    // The BLAS cannot run the probe (e.g. it failed to load): the estimate is still a device.
    spec.sources["peak_tflops"] =
        fmt::format("estimated from CPU facts (peak probe: {})", e.what());
  } catch (const BackendError& e) {
    spec.sources["peak_tflops"] =
        fmt::format("estimated from CPU facts (peak probe: {})", e.what());
  }
  spec.validate();
  return spec;
}

DeviceSpec gpu_device_spec(const GpuInfo& gpu) {
  const auto name = catalog_name_for_gpu(gpu.name);
  if (name.empty()) {
    throw InvalidArgument(fmt::format(
        "GPU '{}' is not in the device catalog ({}); describe it in a JSON file and name it in "
        "request.device",
        gpu.name, fmt::join(catalog_devices(), ", ")));
  }
  DeviceSpec d = device_from_catalog(name);
  if (gpu.sm_count > 0) {
    // A part of the chip (a MIG slice, a cut-down SKU under the same name) has the catalog's
    // per-SM rate, not its whole-chip peak: the peaks scale with the SMs present.
    if (d.compute_units > 0 && gpu.sm_count != d.compute_units) {
      const double share = static_cast<double>(gpu.sm_count) / d.compute_units;
      for (auto& [dtype, peak] : d.peak_tflops) {
        peak *= share;
        d.sources["peak_tflops." + std::string(to_string(dtype))] =
            fmt::format("catalog '{}' x {} of its {} SMs (cudaDeviceProp.multiProcessorCount)",
                        name, gpu.sm_count, d.compute_units);
      }
    }
    d.compute_units = gpu.sm_count;
    d.sources["compute_units"] = "cudaDeviceProp.multiProcessorCount";
  }
  // The memory the runtime reports where it is well below the entry's (a MIG slice, or a smaller
  // board under the same name: a V100 of 16 GB read as the 32 GB entry). A MIG slice also has its
  // share of the bandwidth (its memory slices): the whole chip's made skinny GEMMs look 8x faster
  // on a 1g slice; a smaller board has the same bandwidth. The whole chip's memory as the runtime
  // reports it (binary units, less what the driver keeps) is within 10% of the entry.
  if (gpu.memory_bytes > 0 && d.memory_gb > 0) {
    const double share = static_cast<double>(gpu.memory_bytes) / (d.memory_gb * 1e9);
    if (share < 0.9) {
      d.memory_gb = static_cast<double>(gpu.memory_bytes) / 1e9;
      d.sources["memory_gb"] = "cudaDeviceProp.totalGlobalMem";
      std::string lower = gpu.name;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower.find("mig") != std::string::npos) {
        d.memory_bandwidth_gbs *= share;
        d.sources["memory_bandwidth_gbs"] = fmt::format(
            "catalog '{}' x {:.3f}, the share of its memory this MIG slice has "
            "(cudaDeviceProp.totalGlobalMem)",
            name, share);
      }
    }
  }
  if (gpu.l2_bytes > 0) {
    d.l2_bytes = static_cast<double>(gpu.l2_bytes);
    d.sources["l2_bytes"] = "cudaDeviceProp.l2CacheSize";
  }
  return d;
}

}  // namespace mcr::codesign::bench
