// Calibration data behind the catalog: the h200 entry against the committed H200 cuBLASLt sweep
// (data/measurements/), the error bar a calibration stores with a device, and the provenance of a
// measured CPU peak. Everything is computed from committed data or injected values; nothing is
// timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "mcr/codesign/paths.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/calibrate.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/gemmbench/stats.hpp"

namespace mcr::codesign::bench {
namespace {

constexpr const char* kSweep = "measurements/nvidia-h200-cublaslt-20261130.json";
constexpr std::uint64_t kSeed = 1;  // the split the catalog entry was fitted and judged on
constexpr double kHoldout = 0.5;

MeasurementSet sweep() {
  return load_measurements(data_dir() / kSweep);
}

std::vector<GemmMeasurement> held_out(const MeasurementSet& set) {
  const auto [train, test] = split_indices(set.rows.size(), kHoldout, kSeed);
  std::vector<GemmMeasurement> out;
  for (const auto i : test)
    out.push_back(set.rows[i]);
  return out;
}

TEST(H200Catalog, EntryLoadsWithItsErrorBar) {
  const DeviceSpec d = device_from_catalog("h200");
  ASSERT_TRUE(d.prediction_error.has_value());
  EXPECT_EQ(d.prediction_error->count, 119u);
  EXPECT_NE(d.prediction_error->source.find("nvidia-h200-cublaslt-20261130.json"),
            std::string::npos);
  // Every fitted factor is marked measured or estimated, with the sweep named for the measured.
  ASSERT_TRUE(d.sources.count("status.measured"));
  ASSERT_TRUE(d.sources.count("status.estimated"));
  EXPECT_NE(d.sources.at("status.measured").find("nvidia-h200-cublaslt-20261130.json"),
            std::string::npos);
}

// The held-out half of the committed sweep, predicted with the catalog entry, gives the error the
// entry records (and docs/performance/gpu-check.md#h200-refit reports).
TEST(H200Catalog, HeldOutErrorIsTheRecordedOne) {
  const auto set = sweep();
  ASSERT_EQ(set.rows.size(), 237u);
  const auto test = held_out(set);
  ASSERT_EQ(test.size(), 119u);  // round(237 x 0.5)
  const DeviceSpec d = device_from_catalog("h200");
  const auto rows = compare(test, d);
  const ComparisonSummary s = summarize(rows);
  std::cout << "h200 catalog entry, held-out half (seed " << kSeed << "): median |error| "
            << s.median_abs_pct_error << "%, p90 " << s.p90_abs_pct_error << "%\n";
  // 11.41% and 489.1% with the entry before the fit (peak_fraction 0.8111, k_overhead 128,
  // launch_overhead_s 2e-6). The p90 is the odd-M/K GEMMs, which the model predicts about 5x too
  // fast with any single 2-byte tier factor.
  EXPECT_NEAR(s.median_abs_pct_error, 4.838, 0.05);
  EXPECT_NEAR(s.p90_abs_pct_error, 522.98, 0.05);
  EXPECT_NEAR(d.prediction_error->median_abs_pct_error, s.median_abs_pct_error, 0.01);
  EXPECT_NEAR(d.prediction_error->p90_abs_pct_error, s.p90_abs_pct_error, 0.01);
}

// The factors the entry marks as measured are the ones the sweep identifies: refitting from the
// entry on the same split (with the same factors held, docs/performance/gpu-check.md#h200-refit)
// leaves each identified, inside its range, with the entry's value inside the interval the data
// support; every other factor is marked estimated.
TEST(H200Catalog, MeasuredFactorsAreIdentifiedBySweep) {
  const auto set = sweep();
  const DeviceSpec d = device_from_catalog("h200");
  CalibrationOptions o;
  o.seed = kSeed;
  o.holdout_fraction = kHoldout;
  o.fixed = {"latency_floor_s", "memory_efficiency", "alignment_tiers[64B].factor",
             "alignment_tiers[2B].factor", "tiles[128x64].efficiency"};
  const auto r = calibrate(set.rows, d, o);
  const std::string measured = d.sources.at("status.measured");
  const std::string estimated = d.sources.at("status.estimated");
  std::vector<std::string> identified;
  for (const auto& f : r.fitted) {
    if (f.identified) identified.push_back(f.name);
  }
  EXPECT_EQ(identified,
            (std::vector<std::string>{"peak_fraction", "k_overhead", "launch_overhead_s"}));
  for (const auto& f : r.fitted) {
    SCOPED_TRACE(f.name);
    if (!f.identified) continue;  // listed in r.unidentified, checked below
    EXPECT_FALSE(f.at_bound);
    EXPECT_NE(measured.find(f.name), std::string::npos);
    EXPECT_EQ(estimated.find(f.name), std::string::npos);
  }
  const auto value_of = [&d](const std::string& name) {
    const auto& e = d.efficiency;
    if (name == "peak_fraction") return e.peak_fraction;
    if (name == "k_overhead") return e.k_overhead;
    if (name == "launch_overhead_s") return e.launch_overhead_s;
    if (name == "latency_floor_s") return e.latency_floor_s;
    if (name == "memory_efficiency") return e.memory_efficiency;
    for (const auto& t : e.alignment_tiers) {
      if (name == "alignment_tiers[" + std::to_string(t.min_bytes) + "B].factor") return t.factor;
    }
    for (const auto& t : d.tiles) {
      if (name == "tiles[" + std::to_string(t.m) + "x" + std::to_string(t.n) + "].efficiency") {
        return t.efficiency;
      }
    }
    ADD_FAILURE() << "unknown parameter " << name;
    return 0.0;
  };
  for (const auto& f : r.fitted) {
    if (!f.identified) continue;
    EXPECT_GE(value_of(f.name), f.low * (1 - 1e-9)) << f.name;
    EXPECT_LE(value_of(f.name), f.high * (1 + 1e-9)) << f.name;
  }
  for (const auto& u : r.unidentified) {
    const std::string name = u.substr(0, u.find(": "));
    EXPECT_NE(estimated.find(name), std::string::npos) << name;
  }
  for (const auto& name : o.fixed)
    EXPECT_NE(estimated.find(name), std::string::npos) << name;
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(quantile({5, 1, 3}, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9), 9.1);  // position 8.1
  EXPECT_DOUBLE_EQ(quantile({4}, 0.9), 4.0);
  EXPECT_DOUBLE_EQ(quantile({2, 8}, 0.0), 2.0);
  EXPECT_DOUBLE_EQ(quantile({2, 8}, 1.0), 8.0);
  EXPECT_THROW(quantile({}, 0.5), InvalidArgument);
  EXPECT_THROW(quantile({1}, 1.5), InvalidArgument);
}

// A calibration stores its held-out error with the device it writes: the same statistics as its
// own held-out summary, and the split that produced them. Nothing held out: no error bar.
TEST(CalibrationErrorBar, StoredWithTheFittedDevice) {
  const auto set = sweep();
  std::vector<GemmMeasurement> aligned;  // a small, cheap subset: aligned model GEMMs
  for (const auto& m : set.rows) {
    if (m.gemm.m % 128 == 0 && m.gemm.n % 128 == 0 && m.gemm.k % 128 == 0) aligned.push_back(m);
    if (aligned.size() == 24) break;
  }
  CalibrationOptions o;
  o.seed = 11;
  o.max_evaluations = 300;
  o.restarts = 0;
  o.data_label = "aligned subset";
  const auto r = calibrate(aligned, device_from_catalog("h200"), o);
  ASSERT_TRUE(r.device.prediction_error.has_value());
  EXPECT_EQ(r.device.prediction_error->count, r.holdout_count);
  EXPECT_DOUBLE_EQ(r.device.prediction_error->median_abs_pct_error,
                   r.holdout_after.median_abs_pct_error);
  EXPECT_DOUBLE_EQ(r.device.prediction_error->p90_abs_pct_error, r.holdout_after.p90_abs_pct_error);
  EXPECT_NE(r.device.prediction_error->source.find("aligned subset"), std::string::npos);
  EXPECT_NE(r.device.prediction_error->source.find("--seed 11"), std::string::npos);
  o.holdout_fraction = 0.0;
  EXPECT_FALSE(calibrate(aligned, device_from_catalog("h200"), o).device.prediction_error);
}

TEST(CalibrationFix, HeldParametersKeepTheirValueAndUnknownNamesFail) {
  const auto set = sweep();
  std::vector<GemmMeasurement> some(set.rows.begin(), set.rows.begin() + 30);
  CalibrationOptions o;
  o.max_evaluations = 200;
  o.restarts = 0;
  o.fixed = {"k_overhead", "peak_fraction"};
  const DeviceSpec start = device_from_catalog("h200");
  const auto r = calibrate(some, start, o);
  EXPECT_DOUBLE_EQ(r.device.efficiency.k_overhead, start.efficiency.k_overhead);
  EXPECT_DOUBLE_EQ(r.device.efficiency.peak_fraction, start.efficiency.peak_fraction);
  EXPECT_EQ(r.fixed, o.fixed);
  for (const auto& f : r.fitted) {
    EXPECT_NE(f.name, "k_overhead");
    EXPECT_NE(f.name, "peak_fraction");
  }
  o.fixed = {"no_such_factor"};
  try {
    calibrate(some, start, o);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_factor"), std::string::npos) << e.what();
  }
}

// What `mcr plan --system local-cpu` prints as the peak's source, for an injected probe result.
TEST(LocalCpuPeak, MeasuredPeakNamesTheProbe) {
  CpuInfo cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.model_name = "test CPU";
  cpu.cores = 2;
  cpu.simd_bits = 256;
  cpu.fma = true;
  cpu.freq_ghz = 2.0;
  cpu.freq_source = "test";
  DeviceSpec d = cpu_device_spec(cpu, 10.0);
  const std::string estimated = peak_source(d, DType::fp32);
  EXPECT_NE(estimated.find("cores x GHz"), std::string::npos) << estimated;
  PeakProbe probe;
  probe.plan = {1024, 3};
  probe.tflops = 0.0425;
  probe.seconds = 0.2;
  probe.runner = "test BLAS";
  apply_measured_peak(d, probe);
  EXPECT_DOUBLE_EQ(d.peak_for(DType::fp32), 0.0425);
  const std::string measured = peak_source(d, DType::fp32);
  EXPECT_EQ(measured.rfind("measured: best of 3 fp32 SGEMMs m=n=k=1024 through test BLAS", 0), 0u)
      << measured;
  EXPECT_NE(measured.find("fp32 measured (peak probe)"), std::string::npos) << measured;
  EXPECT_EQ(peak_source(DeviceSpec{}, DType::fp32), "not documented");
}

}  // namespace
}  // namespace mcr::codesign::bench
