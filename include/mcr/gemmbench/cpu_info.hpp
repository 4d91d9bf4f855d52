// Description of the local CPU, read from /proc/cpuinfo, sysfs and the scheduler's CPU mask, so
// that GEMMs measured here can be compared against the same efficiency model used for GPUs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mcr::codesign::bench {

struct CpuCache {
  int level = 0;
  std::string type;  ///< "Data", "Instruction" or "Unified" (sysfs wording)
  std::int64_t size_bytes = 0;
};

struct CpuInfo {
  std::string vendor;  ///< e.g. "GenuineIntel", "AuthenticAMD"
  std::string model_name;
  int family = 0;  ///< x86 "cpu family"
  /// Physical cores among the CPUs this process may run on: SMT siblings (hyperthreads) share a
  /// core's FMA units and count once (sysfs topology); where the topology is unreadable, the CPUs.
  int cores = 0;
  int logical_cpus = 0;  ///< CPUs this process may run on (sched_getaffinity)
  int simd_bits = 128;  ///< widest vector ISA advertised: 128 (SSE/NEON), 256 (AVX2), 512 (AVX-512)
  bool fma = false;
  bool avx512_bf16 = false;
  double freq_ghz = 0.0;                                   ///< 0 when nothing readable
  std::string freq_source;                                 ///< where freq_ghz came from
  std::int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  ///< per-instance sizes; 0 if unknown
  /// L3 caches among the CPUs this process may run on (one per chiplet or socket; sysfs
  /// shared_cpu_list), 1 when unreadable.
  int l3_instances = 1;

  /// Width of the FMA data path in bits. AMD Zen 1-4 execute 512-bit instructions as two 256-bit
  /// halves, so their throughput equals AVX2 even when AVX-512 is advertised.
  int fma_datapath_bits() const;
  /// fp32 FLOP per cycle per core: 2 (multiply + add) x FMA pipes x lanes. Two FMA pipes is the
  /// norm for every x86 server core since Haswell and Zen.
  double fp32_flop_per_cycle() const;
  /// Theoretical fp32 peak in TFLOP/s for all `cores`: cores x GHz x FLOP/cycle / 1000.
  double fp32_peak_tflops() const;
  /// The last-level cache, in bytes, over all its instances (l3_bytes x l3_instances; else the
  /// largest cache); 0 if unknown.
  std::int64_t llc_bytes() const;
  /// The last-level cache `threads` threads can fill: at most one L3 instance each (a single
  /// thread fills its own chiplet's L3, not the others').
  std::int64_t llc_bytes_for(int threads) const;
};

/// Fills the parts of `info` that /proc/cpuinfo text provides (vendor, model, family, flags,
/// "cpu MHz"). Exposed for tests; detect_cpu() uses it on the real file.
void parse_proc_cpuinfo(std::string_view text, CpuInfo& info);

/// Physical cores among CPUs given by their sysfs thread_siblings_list ("0,4", "0-1"): one per
/// distinct list. Exposed for tests; detect_cpu() reads the lists of the CPUs it may run on.
int count_physical_cores(const std::vector<std::string>& thread_siblings_lists);

/// Instances of one cache level among CPUs given by their sysfs shared_cpu_list: one per distinct
/// list. Exposed for tests; detect_cpu() reads the L3's lists of the CPUs it may run on.
int count_cache_instances(const std::vector<std::string>& shared_cpu_lists);

/// Parses a sysfs cache size such as "32K", "1024K" or "32M" into bytes (0 if unparsable).
std::int64_t parse_cache_size(std::string_view text);

/// Clock the current core actually runs at, in GHz, timed with a chain of dependent integer adds
/// (one per cycle on every x86-64 core); best of 16 runs of ~1 ms. 0 where unsupported.
/// Virtual machines report only the base clock in /proc/cpuinfo, while turbo runs far above it.
double measure_core_clock_ghz();

/// Reads everything about this machine's CPU. The frequency is, in order of preference, sysfs
/// cpuinfo_max_freq, the measured clock (when higher than "cpu MHz"), "cpu MHz". Never throws:
/// unknown fields stay at their defaults.
CpuInfo detect_cpu();

}  // namespace mcr::codesign::bench
