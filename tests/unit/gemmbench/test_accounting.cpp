// FLOP and byte accounting of measured GEMMs, and the sweep's list of GEMMs.
#include <gtest/gtest.h>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/measurement.hpp"
#include "mcr/gemmbench/runner.hpp"
#include "mcr/gemmbench/sweep.hpp"

namespace mcr::codesign::bench {
namespace {

Gemm make_gemm(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dtype) {
  Gemm g;
  g.role = "test";
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.dtype = dtype;
  return g;
}

TEST(Accounting, FlopsAndTflopsOfABatchedGemm) {
  // 2 * m * n * k * batch = 2 * 2 * 3 * 4 * 5 = 240 FLOP; in 1 ns that is 240 GFLOP/s = 0.24
  // TFLOP/s.
  GemmMeasurement m{make_gemm(2, 3, 4, 5, DType::fp32), Timing{}};
  m.timing.median_s = 1e-9;
  EXPECT_DOUBLE_EQ(m.gemm.flops(), 240.0);
  EXPECT_DOUBLE_EQ(m.tflops(), 0.24);
}

TEST(Accounting, BytesCountEachOperandOnce) {
  // fp32: (A 2x4 + B 4x3 + C 2x3) = 8 + 12 + 6 = 26 elements, x 4 B x 5 batches = 520 B.
  GemmMeasurement m{make_gemm(2, 3, 4, 5, DType::fp32), Timing{}};
  m.timing.median_s = 1e-6;
  EXPECT_DOUBLE_EQ(m.gemm.bytes(), 520.0);
  EXPECT_DOUBLE_EQ(m.gbs(), 520.0 / 1e-6 / 1e9);
  // bf16 halves it; arithmetic intensity 240 / 260.
  const auto half = make_gemm(2, 3, 4, 5, DType::bf16);
  EXPECT_DOUBLE_EQ(half.bytes(), 260.0);
  EXPECT_DOUBLE_EQ(half.arithmetic_intensity(), 240.0 / 260.0);
}

TEST(Accounting, PythiaMlpUpProjection) {
  // Pythia-1.4B MLP up-projection at s = 2048, b = 1: M = 2048, N = 4h = 8192, K = h = 2048.
  // FLOPs 2 * 2048 * 8192 * 2048 = 68 719 476 736 (8 * b * s * h^2, codesign-notes table 2.1).
  const auto g = make_gemm(2048, 8192, 2048, 1, DType::fp32);
  EXPECT_DOUBLE_EQ(g.flops(), 68719476736.0);
  EXPECT_DOUBLE_EQ(g.flops(), 8.0 * 2048 * 2048.0 * 2048);
}

TEST(Accounting, RotationSetsCoverTheTarget) {
  EXPECT_EQ(rotation_sets(1000, 64000, 4096), 64);
  EXPECT_EQ(rotation_sets(1000, 64001, 4096), 65);       // rounds up
  EXPECT_EQ(rotation_sets(1 << 30, 64 << 20, 4096), 1);  // one set already exceeds the cache
  EXPECT_EQ(rotation_sets(16, 64 << 20, 4096), 4096);    // capped
  EXPECT_EQ(rotation_sets(0, 100, 10), 1);
}

TEST(Sweep, GridIsTheCartesianProduct) {
  const auto grid =
      grid_gemms({64, 127}, {128, 255, 256}, {1000}, {1, 4}, {DType::fp32, DType::bf16});
  ASSERT_EQ(grid.size(), 2u * 3u * 1u * 2u * 2u);
  EXPECT_EQ(grid.front().m, 64);
  EXPECT_EQ(grid.front().n, 128);
  EXPECT_EQ(grid.front().batch, 1);
  EXPECT_EQ(grid.front().role, "grid");
  EXPECT_EQ(grid[1].batch, 4);
  EXPECT_EQ(grid[1].role, "grid_bmm");
  EXPECT_EQ(grid.front().dtype, DType::fp32);
  EXPECT_EQ(grid.back().dtype, DType::bf16);
  EXPECT_EQ(grid.back().m, 127);
  EXPECT_EQ(grid.back().n, 256);
}

/// Counts calls and returns a time that depends only on the shape.
class FakeRunner : public GemmRunner {
 public:
  int calls = 0;
  std::string backend() const override { return "fake"; }
  std::string description() const override { return "fake runner"; }
  bool supports(DType) const override { return true; }
  std::size_t cache_bytes() const override { return 1; }
  std::int64_t unsupported_m = -1;  ///< GEMMs with this m are rejected
  Timing time(const Gemm& g, const MeasureOptions&) override {
    ++calls;
    if (g.m == unsupported_m) throw UnsupportedError("no algorithm for this shape");
    Timing t;
    t.median_s = t.min_s = t.max_s = g.flops() * 1e-12;  // exactly 1 TFLOP/s
    t.samples = 1;
    return t;
  }
};

TEST(Sweep, IdenticalShapesAreTimedOnce) {
  auto gemms = grid_gemms({64, 128}, {64}, {64}, {1}, {DType::fp32});
  gemms.push_back(gemms.front());
  gemms.back().role = "same shape, other role";
  FakeRunner runner;
  std::size_t progress_calls = 0;
  const auto set = run_sweep(runner, gemms, MeasureOptions{},
                             [&](std::size_t i, std::size_t total, const GemmMeasurement&) {
                               EXPECT_EQ(i, progress_calls);
                               EXPECT_EQ(total, 3u);
                               ++progress_calls;
                             });
  EXPECT_EQ(runner.calls, 2);
  EXPECT_EQ(progress_calls, 3u);
  ASSERT_EQ(set.rows.size(), 3u);
  EXPECT_EQ(set.rows[2].gemm.role, "same shape, other role");
  EXPECT_DOUBLE_EQ(set.rows[2].tflops(), 1.0);
  EXPECT_EQ(set.backend, "fake");
}

TEST(Sweep, UnsupportedShapesAreSkippedWithTheReason) {
  const auto gemms = grid_gemms({64, 128, 256}, {64}, {64}, {1}, {DType::fp8});
  FakeRunner runner;
  runner.unsupported_m = 128;
  const auto set = run_sweep(runner, gemms, MeasureOptions{});
  ASSERT_EQ(set.rows.size(), 2u);
  EXPECT_EQ(set.rows[0].gemm.m, 64);
  EXPECT_EQ(set.rows[1].gemm.m, 256);
  ASSERT_EQ(set.skipped.size(), 1u);
  EXPECT_EQ(set.skipped[0].gemm.m, 128);
  EXPECT_EQ(set.skipped[0].reason, "no algorithm for this shape");
  // Skipped GEMMs survive a JSON round trip.
  const auto back = nlohmann::json::parse(nlohmann::json(set).dump()).get<MeasurementSet>();
  ASSERT_EQ(back.skipped.size(), 1u);
  EXPECT_EQ(back.skipped[0].gemm.m, 128);
  EXPECT_EQ(back.skipped[0].gemm.dtype, DType::fp8);
  EXPECT_EQ(back.skipped[0].reason, "no algorithm for this shape");
}

}  // namespace
}  // namespace mcr::codesign::bench
