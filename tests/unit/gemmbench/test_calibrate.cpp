// Calibration must recover parameters that generated the data: measurements are made by predict()
// itself with known efficiency parameters, then perturbed with seeded log-normal noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "mcr/codesign/gemm_model.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/calibrate.hpp"

namespace mcr::codesign::bench {
namespace {

DeviceSpec synthetic_device() {
  DeviceSpec d;
  d.name = "synthetic-gpu";
  d.vendor = "test";
  d.compute_units = 16;
  d.clock_mhz = 1000;
  d.peak_tflops[DType::bf16] = 100.0;
  // Fast memory, so that short-K GEMMs stay compute bound and reveal k_overhead.
  d.memory_bandwidth_gbs = 20000.0;
  d.l2_bytes = 8 << 20;
  d.alignment_bytes = 128;
  d.tiles = {{128, 128, 1.0}, {64, 64, 0.8}};
  d.efficiency.peak_fraction = 0.85;
  d.efficiency.alignment_tiers = {{128, 1.0}, {16, 1.0}, {2, 1.0}};
  d.efficiency.k_overhead = 100;
  d.efficiency.memory_efficiency = 0.8;
  d.efficiency.launch_overhead_s = 2e-6;
  d.efficiency.latency_floor_s = 4e-6;
  return d;
}

EfficiencyParams truth() {
  EfficiencyParams e = synthetic_device().efficiency;
  e.peak_fraction = 0.7;
  e.alignment_tiers = {{128, 1.0}, {16, 0.8}, {2, 0.5}};
  e.k_overhead = 40;
  e.launch_overhead_s = 5e-6;
  return e;
}

std::vector<GemmMeasurement> synthetic_measurements(std::uint64_t seed, double noise_sigma) {
  DeviceSpec device = synthetic_device();
  device.efficiency = truth();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, noise_sigma);
  // Aligned (128-byte), 16-byte and 2-byte dimensions, small to large, so every parameter matters.
  const std::int64_t dims[] = {64, 127, 128, 200, 256, 1000, 1024, 2048};
  std::vector<GemmMeasurement> out;
  for (auto m : dims) {
    for (auto n : dims) {
      for (auto k : {32L, 64L, 128L, 256L, 1000L, 4096L}) {
        GemmMeasurement meas;
        meas.gemm.role = "synthetic";
        meas.gemm.m = m;
        meas.gemm.n = n;
        meas.gemm.k = k;
        meas.gemm.dtype = DType::bf16;
        meas.timing.median_s = predict(meas.gemm, device).time_s * std::exp(noise(rng));
        meas.timing.samples = 1;
        out.push_back(meas);
      }
    }
  }
  return out;
}

TEST(Calibrate, RecoversKnownParametersFromNoisyModelData) {
  const std::uint64_t seed = 20240601;
  std::printf("synthetic data seed %llu, split seed 7\n", static_cast<unsigned long long>(seed));
  const auto data = synthetic_measurements(seed, 0.03);  // 3 % log-normal noise
  ASSERT_EQ(data.size(), 384u);
  CalibrationOptions options;
  options.seed = 7;
  options.max_evaluations = 1500;
  options.restarts = 1;
  const auto r = calibrate(data, synthetic_device(), options);
  EXPECT_EQ(r.train_count, 192u);
  EXPECT_EQ(r.holdout_count, 192u);
  const auto& e = r.device.efficiency;
  const auto t = truth();
  EXPECT_NEAR(e.peak_fraction, t.peak_fraction, 0.03);
  EXPECT_NEAR(e.alignment_tiers[1].factor, t.alignment_tiers[1].factor, 0.05);
  EXPECT_NEAR(e.alignment_tiers[2].factor, t.alignment_tiers[2].factor, 0.05);
  EXPECT_NEAR(e.k_overhead, t.k_overhead, 15.0);
  EXPECT_DOUBLE_EQ(e.alignment_tiers[0].factor, 1.0);  // the reference tier is not fitted
  // Held-out error ends near the noise level (median |3 % log-normal| is about 2 %), and far below
  // where it started.
  EXPECT_LT(r.holdout_after.median_abs_pct_error, 4.0);
  EXPECT_GT(r.holdout_before.median_abs_pct_error, 15.0);
  EXPECT_GT(r.holdout_after.spearman, 0.98);
}

TEST(Calibrate, SplitIsSeededAndDisjoint) {
  const auto [train, test] = split_indices(10, 0.5, 42);
  EXPECT_EQ(train.size(), 5u);
  EXPECT_EQ(test.size(), 5u);
  std::vector<std::size_t> all(train);
  all.insert(all.end(), test.begin(), test.end());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i], i);
  EXPECT_EQ(split_indices(10, 0.5, 42), split_indices(10, 0.5, 42));
  EXPECT_NE(split_indices(10, 0.5, 42).first, split_indices(10, 0.5, 43).first);
  EXPECT_EQ(split_indices(10, 0.0, 1).first.size(), 10u);
  EXPECT_EQ(split_indices(4, 0.1, 1).second.size(), 1u) << "a hold-out asked for rounded to none";
  EXPECT_EQ(split_indices(1, 0.1, 1).second.size(), 0u) << "nothing left to fit";
  EXPECT_THROW(split_indices(10, 1.0, 1), InvalidArgument);
}

TEST(Calibrate, NelderMeadFindsAQuadraticMinimum) {
  int evals = 0;
  const auto x = nelder_mead(
      [](const std::vector<double>& v) {
        return (v[0] - 3) * (v[0] - 3) + 10 * (v[1] + 1) * (v[1] + 1);
      },
      {0, 0}, {1, 1}, 2000, &evals);
  EXPECT_NEAR(x[0], 3.0, 1e-4);
  EXPECT_NEAR(x[1], -1.0, 1e-4);
  EXPECT_GT(evals, 0);
  EXPECT_LE(evals, 2000 + 3);  // a final shrink may evaluate a few more points
}

CalibrationOptions quick_fit() {
  CalibrationOptions options;
  options.seed = 7;
  options.max_evaluations = 60;
  options.restarts = 0;
  return options;
}

TEST(Calibrate, EachShapeIsOnePointNeverFittedAndHeldOutAtOnce) {
  // Every shape twice with one timing, as a sweep writes shapes that several GEMMs share.
  auto data = synthetic_measurements(20240601, 0.03);
  const std::size_t shapes = data.size();
  for (std::size_t i = 0; i < shapes; ++i) {
    data.push_back(data[i]);
    data.back().gemm.role = "same shape, other role";
  }
  const auto [train, test] = split_by_shape(data, 0.5, 7);
  EXPECT_EQ(train.size() + test.size(), shapes);
  for (const auto i : train)
    EXPECT_LT(i, shapes) << "a later row of shape " << i % shapes << " was kept";
  for (const auto i : test)
    EXPECT_LT(i, shapes) << "a later row of shape " << i % shapes << " was kept";
  // Each shape where its first row went in the plain split of all rows.
  const auto plain_test = split_indices(data.size(), 0.5, 7).second;
  for (const auto i : test)
    EXPECT_TRUE(std::binary_search(plain_test.begin(), plain_test.end(), i)) << i;
  const auto r = calibrate(data, synthetic_device(), quick_fit());
  EXPECT_EQ(r.duplicate_rows, shapes);
  EXPECT_EQ(r.train_count, train.size());
  EXPECT_EQ(r.holdout_count, test.size());
  // Without repeated shapes the split is the plain one.
  data.resize(shapes);
  EXPECT_EQ(split_by_shape(data, 0.5, 7), split_indices(shapes, 0.5, 7));
  EXPECT_EQ(calibrate(data, synthetic_device(), quick_fit()).duplicate_rows, 0u);
}

TEST(Calibrate, AlignmentTiersInAnyOrderFitTheSameParameters) {
  const auto data = synthetic_measurements(20240601, 0.03);
  auto reversed = synthetic_device();
  std::reverse(reversed.efficiency.alignment_tiers.begin(),
               reversed.efficiency.alignment_tiers.end());  // 2, 16, 128 bytes
  const auto sorted_fit = calibrate(data, synthetic_device(), quick_fit());
  const auto reversed_fit = calibrate(data, reversed, quick_fit());
  EXPECT_EQ(reversed_fit.parameters, sorted_fit.parameters);
  EXPECT_NE(std::find(sorted_fit.parameters.begin(), sorted_fit.parameters.end(),
                      "alignment_tiers[2B].factor"),
            sorted_fit.parameters.end());
  EXPECT_EQ(reversed_fit.device.efficiency.peak_fraction,
            sorted_fit.device.efficiency.peak_fraction);
}

TEST(Calibrate, RejectsDtypesTheDeviceLacksAndTooLittleData) {
  auto data = synthetic_measurements(1, 0.0);
  data[3].gemm.dtype = DType::fp8;
  EXPECT_THROW(calibrate(data, synthetic_device(), {}), InvalidArgument);
  data.resize(4);
  data[3].gemm.dtype = DType::bf16;
  EXPECT_THROW(calibrate(data, synthetic_device(), {}), InvalidArgument);  // 2 points to fit
}

}  // namespace
}  // namespace mcr::codesign::bench
