// The quick SGEMM probe that gives the local CPU device a measured fp32 peak.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/local_device.hpp"

namespace mcr::codesign::bench {

PeakProbePlan peak_probe_plan(double guessed_tflops, double call_budget_s) {
  constexpr std::int64_t kStep = 256, kMin = 512, kMax = 4096;
  PeakProbePlan plan{1024, 3};
  if (!(guessed_tflops > 0) || !(call_budget_s > 0)) return plan;
  // 2 n^3 FLOP in call_budget_s at the guessed rate.
  const double side = std::cbrt(call_budget_s * guessed_tflops * 1e12 / 2.0);
  const auto rounded = static_cast<std::int64_t>(side / kStep) * kStep;
  plan.n = std::clamp(rounded, kMin, kMax);
  return plan;
}

PeakProbe probe_fp32_peak(GemmRunner& runner, const PeakProbePlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  Gemm g;
  g.m = g.n = g.k = plan.n;
  g.dtype = DType::fp32;
  g.role = "peak-probe";
  MeasureOptions options;
  options.warmup_iterations = 1;
  options.warmup_seconds = 0;
  options.min_samples = plan.repetitions;
  options.max_samples = plan.repetitions;
  options.min_seconds = 0;
  options.max_seconds = std::numeric_limits<double>::infinity();  // exactly the repetitions
  options.rotation_bytes = 1;  // one buffer set: the best rate, not a cold-cache one
  const Timing t = runner.time(g, options);
  PeakProbe probe;
  probe.plan = plan;
  probe.tflops = t.min_s > 0 ? g.flops() / t.min_s / 1e12 : 0.0;
  probe.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  probe.runner = runner.description();
  return probe;
}

void apply_measured_peak(DeviceSpec& d, const PeakProbe& probe) {
  if (!(probe.tflops > 0)) {
    throw InvalidArgument(fmt::format(
        "peak probe: measured {} TFLOP/s for fp32 {}^3 on '{}'; a peak must be positive",
        probe.tflops, probe.plan.n, d.name));
  }
  const auto fp32 = d.peak_tflops.find(DType::fp32);
  if (fp32 == d.peak_tflops.end() || !(fp32->second > 0)) {
    throw InvalidArgument(fmt::format(
        "peak probe: device '{}' has no fp32 peak to replace with the measured one", d.name));
  }
  const double guessed = fp32->second;
  const double scale = probe.tflops / guessed;
  for (auto& [dtype, peak] : d.peak_tflops)
    peak *= scale;
  fp32->second = probe.tflops;  // exact, not guess x (measured / guess)
  const std::string formula = d.sources.count("peak_tflops.fp32") > 0
                                  ? d.sources["peak_tflops.fp32"]
                                  : std::string("the formula");
  d.sources["peak_tflops.fp32"] = fmt::format(
      "measured: best of {} fp32 SGEMMs m=n=k={} through {}: {:.4g} TFLOP/s in a {:.2f} s probe "
      "(estimate before the probe: {:.4g} TFLOP/s from {})",
      probe.plan.repetitions, probe.plan.n, probe.runner, probe.tflops, probe.seconds, guessed,
      formula);
  d.sources["peak_tflops"] = "fp32 measured (peak probe); other dtypes keep their ratio to fp32";
  d.efficiency.peak_fraction = 1.0;
  d.sources["efficiency.peak_fraction"] = "1: the fp32 peak is a measured, achieved SGEMM rate";
}

}  // namespace mcr::codesign::bench
