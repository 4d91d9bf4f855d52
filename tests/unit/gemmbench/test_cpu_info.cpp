#include <gtest/gtest.h>

#include "mcr/codesign/gemm_model.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/cpu_info.hpp"
#include "mcr/gemmbench/gpu_info.hpp"
#include "mcr/gemmbench/local_device.hpp"

namespace mcr::codesign::bench {
namespace {

// Abridged /proc/cpuinfo of a 2-vCPU AMD EPYC (Zen 4) virtual machine; only the first block counts.
constexpr const char* kZen4 = R"(processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
cpu MHz		: 2596.142
flags		: fpu sse sse2 ssse3 fma sse4_1 avx avx2 avx512f avx512dq avx512_bf16 avx512vl

processor	: 1
vendor_id	: GenuineIntel
model name	: should be ignored
)";

constexpr const char* kHaswell = R"(vendor_id	: GenuineIntel
cpu family	: 6
model name	: Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz
cpu MHz		: 2500.000
flags		: fpu sse sse2 avx fma avx2
)";

TEST(CpuInfo, ParsesZen4) {
  CpuInfo info;
  info.cores = 2;
  parse_proc_cpuinfo(kZen4, info);
  EXPECT_EQ(info.vendor, "AuthenticAMD");
  EXPECT_EQ(info.model_name, "AMD EPYC");
  EXPECT_EQ(info.family, 25);
  EXPECT_EQ(info.simd_bits, 512);
  EXPECT_TRUE(info.fma);
  EXPECT_TRUE(info.avx512_bf16);
  EXPECT_DOUBLE_EQ(info.freq_ghz, 2.596142);
  // Zen 4 runs AVX-512 on 256-bit halves: 2 pipes x 8 lanes x 2 = 32 FLOP/cycle.
  EXPECT_EQ(info.fma_datapath_bits(), 256);
  EXPECT_DOUBLE_EQ(info.fp32_flop_per_cycle(), 32.0);
  // 2 cores x 2.596142 GHz x 32 = 166.153088 GFLOP/s.
  EXPECT_NEAR(info.fp32_peak_tflops(), 0.166153088, 1e-12);
}

TEST(CpuInfo, ParsesHaswellAndKeepsEarlierFrequency) {
  CpuInfo info;
  info.cores = 12;
  info.freq_ghz = 3.3;  // e.g. from sysfs cpuinfo_max_freq, which wins over "cpu MHz"
  info.freq_source = "sysfs";
  parse_proc_cpuinfo(kHaswell, info);
  EXPECT_EQ(info.simd_bits, 256);
  EXPECT_FALSE(info.avx512_bf16);
  EXPECT_DOUBLE_EQ(info.freq_ghz, 3.3);
  EXPECT_DOUBLE_EQ(info.fp32_flop_per_cycle(), 32.0);  // 2 x 8 lanes x 2
}

TEST(CpuInfo, FlagsMatchWholeWordsOnly) {
  CpuInfo info;
  parse_proc_cpuinfo("flags : avx512fx fmax\n", info);
  EXPECT_EQ(info.simd_bits, 128);
  EXPECT_FALSE(info.fma);
}

TEST(CpuInfo, CacheSizes) {
  EXPECT_EQ(parse_cache_size("32K"), 32 * 1024);
  EXPECT_EQ(parse_cache_size("1024K\n"), 1024 * 1024);
  EXPECT_EQ(parse_cache_size("32M"), 32 * 1024 * 1024);
  EXPECT_EQ(parse_cache_size("512"), 512);
  EXPECT_EQ(parse_cache_size("lots"), 0);
}

TEST(CpuInfo, HyperthreadsShareTheirCore) {
  // 4 CPUs, 2 cores with 2 threads each (siblings listed as sysfs writes them): 2 cores. Without
  // SMT every CPU lists itself alone.
  EXPECT_EQ(count_physical_cores({"0,2", "1,3", "0,2", "1,3"}), 2);
  EXPECT_EQ(count_physical_cores({"0-1", "0-1"}), 1);
  EXPECT_EQ(count_physical_cores({"0", "1"}), 2);
  EXPECT_EQ(count_physical_cores({}), 0);
}

// A chiplet CPU has one L3 per chiplet: cpu0's alone understated the cache the rotation has to
// exceed (32 MiB of 768 on a two-socket EPYC), so operands stayed cached.
TEST(CpuInfo, LastLevelCacheCountsEveryInstance) {
  EXPECT_EQ(count_cache_instances({"0-7", "0-7", "8-15", "8-15"}), 2);
  EXPECT_EQ(count_cache_instances({"0-1", "0-1"}), 1);
  CpuInfo info;
  info.l2_bytes = 1 << 20;
  info.l3_bytes = 32 << 20;
  info.l3_instances = 24;
  EXPECT_EQ(info.llc_bytes(), std::int64_t{768} << 20);
  EXPECT_EQ(info.llc_bytes_for(1), std::int64_t{32} << 20);  // one thread fills one L3
  EXPECT_EQ(info.llc_bytes_for(4), std::int64_t{128} << 20);
  EXPECT_EQ(info.llc_bytes_for(64), std::int64_t{768} << 20);
  info.l3_instances = 0;  // unread: one
  EXPECT_EQ(info.llc_bytes(), std::int64_t{32} << 20);
}

TEST(CpuInfo, DetectsSomethingPlausibleHere) {
  const auto info = detect_cpu();
  EXPECT_GE(info.cores, 1);
  EXPECT_GE(info.logical_cpus, info.cores);
  EXPECT_GE(info.simd_bits, 128);
}

TEST(LocalDevice, CpuSpecIsUsableByPredict) {
  CpuInfo info;
  info.cores = 2;
  info.l3_bytes = 32 << 20;
  parse_proc_cpuinfo(kZen4, info);
  const auto spec = cpu_device_spec(info, 20.0);
  EXPECT_EQ(spec.name, kLocalCpuName);
  EXPECT_EQ(spec.compute_units, 2);
  EXPECT_NEAR(spec.peak_for(DType::fp32), 0.166153088, 1e-12);
  EXPECT_NEAR(spec.peak_for(DType::bf16), 2 * 0.166153088, 1e-12);
  EXPECT_DOUBLE_EQ(spec.l2_bytes, 32.0 * 1024 * 1024);
  Gemm g;
  g.m = g.n = g.k = 1024;
  g.dtype = DType::fp32;
  const auto p = predict(g, spec);
  EXPECT_GT(p.tflops, 0.0);
  EXPECT_LE(p.tflops, spec.peak_for(DType::fp32));
}

TEST(LocalDevice, UnknownFrequencyIsAClearError) {
  CpuInfo info;
  info.cores = 2;
  EXPECT_THROW(cpu_device_spec(info, 10.0), InvalidArgument);
}

TEST(GpuInfo, CatalogNames) {
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA H200"), "h200");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA H100 PCIe"), "h100-pcie");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA A100-SXM4-80GB"), "a100-80gb");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA A100-PCIE-40GB"), "a100-40gb");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA A10"), "a10");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA B200"), "b200");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA GeForce RTX 4090"), "");
  // Names holding a catalog part's that are other products (they were read as h100-sxm, h200
  // and b200, with those peaks and bandwidths).
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA H100 NVL"), "");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA GH200 480GB"), "");
  EXPECT_EQ(catalog_name_for_gpu("NVIDIA GB200"), "");
}

// A part of a chip (a MIG 1g slice of an H100: 16 of its 132 SMs) has the whole chip's per-SM
// rate: its peaks, and so its predictions, scale with the SMs the driver reports.
TEST(GpuInfo, ASliceOfAChipHasItsShareOfThePeak) {
  GpuInfo slice;
  slice.name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb";
  slice.sm_count = 16;
  slice.memory_bytes = 10LL << 30;  // 1g.10gb: one of the chip's 8 memory slices
  const DeviceSpec whole = device_from_catalog("h100-sxm");
  ASSERT_EQ(whole.compute_units, 132);
  const DeviceSpec part = gpu_device_spec(slice);
  EXPECT_EQ(part.compute_units, 16);
  EXPECT_NEAR(part.peak_for(DType::bf16), whole.peak_for(DType::bf16) * 16 / 132, 1e-9);
  EXPECT_NE(part.sources.at("peak_tflops.bf16").find("16 of its 132 SMs"), std::string::npos)
      << part.sources.at("peak_tflops.bf16");
  Gemm g;
  g.m = g.n = g.k = 8192;
  g.dtype = DType::bf16;
  EXPECT_LT(predict(g, part).tflops, 0.2 * predict(g, whole).tflops);
  // Its memory and bandwidth are its share too (they were the whole chip's).
  EXPECT_NEAR(part.memory_gb, (10LL << 30) / 1e9, 1e-9);
  EXPECT_NEAR(part.memory_bandwidth_gbs, whole.memory_bandwidth_gbs * (10LL << 30) / 80e9, 1e-6);
  // The whole chip as the catalog has it: nothing changes.
  GpuInfo full;
  full.name = "NVIDIA H100 80GB HBM3";
  full.sm_count = 132;
  full.memory_bytes = 80LL << 30;  // the whole chip's 80 GB, as a byte count in binary units
  EXPECT_EQ(gpu_device_spec(full).peak_for(DType::bf16), whole.peak_for(DType::bf16));
  EXPECT_EQ(gpu_device_spec(full).memory_bandwidth_gbs, whole.memory_bandwidth_gbs);
  // A smaller board under the same name (a V100 of 16 GB, the catalog's of 32 GB): its memory,
  // not a share of the bandwidth, which it has in full.
  GpuInfo v100;
  v100.name = "Tesla V100-SXM2-16GB";
  v100.sm_count = 80;
  v100.memory_bytes = 16LL << 30;
  const DeviceSpec v100_entry = device_from_catalog("v100-sxm2-32gb");
  const DeviceSpec small = gpu_device_spec(v100);
  EXPECT_NEAR(small.memory_gb, (16LL << 30) / 1e9, 1e-9);
  EXPECT_EQ(small.memory_bandwidth_gbs, v100_entry.memory_bandwidth_gbs);
}

}  // namespace
}  // namespace mcr::codesign::bench
