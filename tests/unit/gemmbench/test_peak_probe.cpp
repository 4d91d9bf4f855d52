// The local CPU device's quick peak probe: its size and repetition choice, the GEMMs it asks a
// runner for, and the provenance it records. A fake runner keeps every number exact.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/local_device.hpp"

namespace mcr::codesign::bench {
namespace {

TEST(PeakProbePlan, SideMatchesTheCallBudgetRoundedDownTo256) {
  // 2 n^3 = 0.04 s x 0.384e12 FLOP/s -> n = 1973 -> 1792.
  const auto plan = peak_probe_plan(0.384, 0.04);
  EXPECT_EQ(plan.n, 1792);
  EXPECT_EQ(plan.repetitions, 3);
  EXPECT_EQ(peak_probe_plan(0.384).n, 1792);  // the default budget
}

TEST(PeakProbePlan, ClampsAndFallsBack) {
  EXPECT_EQ(peak_probe_plan(1e-6).n, 512);  // a slow core still gets a BLAS-sized problem
  EXPECT_EQ(peak_probe_plan(1e6).n, 4096);  // a huge peak does not make the probe slow
  EXPECT_EQ(peak_probe_plan(0.0).n, 1024);
  EXPECT_EQ(peak_probe_plan(-1.0).n, 1024);
  EXPECT_EQ(peak_probe_plan(std::nan("")).n, 1024);
  for (double guess : {0.01, 0.1, 0.5, 2.0, 10.0}) {
    const auto plan = peak_probe_plan(guess);
    EXPECT_EQ(plan.n % 256, 0) << guess;
    EXPECT_GE(plan.n, 512) << guess;
    EXPECT_LE(plan.n, 4096) << guess;
  }
  EXPECT_LE(peak_probe_plan(0.1).n, peak_probe_plan(1.0).n);
}

class FakeRunner : public GemmRunner {
 public:
  std::string backend() const override { return "cblas"; }
  std::string description() const override { return "fake BLAS, 1 threads"; }
  bool supports(DType dtype) const override { return dtype == DType::fp32; }
  std::size_t cache_bytes() const override { return 1 << 20; }
  Timing time(const Gemm& gemm, const MeasureOptions& options) override {
    last_gemm = gemm;
    last_options = options;
    Timing t;
    t.min_s = 0.5;
    t.median_s = 0.6;
    t.max_s = 0.7;
    t.samples = options.min_samples;
    return t;
  }
  Gemm last_gemm;
  MeasureOptions last_options;
};

TEST(PeakProbe, RunsSquareFp32AndTakesTheFastestCall) {
  FakeRunner runner;
  const auto probe = probe_fp32_peak(runner, {1024, 3});
  EXPECT_EQ(runner.last_gemm.m, 1024);
  EXPECT_EQ(runner.last_gemm.n, 1024);
  EXPECT_EQ(runner.last_gemm.k, 1024);
  EXPECT_EQ(runner.last_gemm.batch, 1);
  EXPECT_EQ(runner.last_gemm.dtype, DType::fp32);
  EXPECT_EQ(runner.last_options.min_samples, 3);
  EXPECT_EQ(runner.last_options.max_samples, 3);
  EXPECT_EQ(runner.last_options.rotation_bytes, 1u);  // one buffer set
  EXPECT_DOUBLE_EQ(probe.tflops, 2.0 * 1024 * 1024 * 1024 / 0.5 / 1e12);
  EXPECT_EQ(probe.plan.n, 1024);
  EXPECT_EQ(probe.runner, "fake BLAS, 1 threads");
  EXPECT_GE(probe.seconds, 0.0);
}

DeviceSpec guessed_cpu() {
  CpuInfo cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.family = 25;
  cpu.model_name = "AMD EPYC";
  cpu.cores = 2;
  cpu.freq_ghz = 3.0;
  cpu.freq_source = "test";
  cpu.simd_bits = 512;
  cpu.fma = true;
  cpu.avx512_bf16 = true;
  cpu.l3_bytes = 32 << 20;
  return cpu_device_spec(cpu, 20.0);
}

TEST(PeakProbe, TheEntryRecordsAMeasuredPeak) {
  DeviceSpec d = guessed_cpu();
  const double guess = d.peak_for(DType::fp32);
  ASSERT_EQ(d.sources["peak_tflops.fp32"].rfind("measured", 0), std::string::npos);
  PeakProbe probe{{1536, 3}, 0.25, 0.2, "fake BLAS, 2 threads"};
  apply_measured_peak(d, probe);
  EXPECT_DOUBLE_EQ(d.peak_for(DType::fp32), 0.25);
  EXPECT_DOUBLE_EQ(d.peak_for(DType::fp64), 0.125);  // ratios to fp32 kept
  EXPECT_DOUBLE_EQ(d.peak_for(DType::bf16), 0.5);
  EXPECT_DOUBLE_EQ(d.efficiency.peak_fraction, 1.0);
  const std::string& source = d.sources["peak_tflops.fp32"];
  EXPECT_EQ(source.rfind("measured", 0), 0u) << source;
  EXPECT_NE(source.find("m=n=k=1536"), std::string::npos) << source;
  EXPECT_NE(source.find("0.25 TFLOP/s"), std::string::npos) << source;
  EXPECT_NE(source.find(fmt::format("{:.4g}", guess)), std::string::npos) << source;
  EXPECT_NO_THROW(d.validate());
}

TEST(PeakProbe, RejectsANonPositiveRate) {
  DeviceSpec d = guessed_cpu();
  PeakProbe probe{{1024, 3}, 0.0, 0.1, "fake"};
  try {
    apply_measured_peak(d, probe);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("must be positive"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mcr::codesign::bench
