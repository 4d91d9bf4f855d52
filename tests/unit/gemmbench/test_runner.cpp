#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/runner.hpp"
#include "mcr/gemmbench/sampler.hpp"
#include "mcr/gemmbench/sweep.hpp"

// OpenBLAS's cblas.h (where the build has it) declares openblas_get_num_threads().
#if __has_include(<cblas.h>)
#include <cblas.h>
#endif

namespace mcr::codesign::bench {
namespace {

TEST(Sampler, GroupsTinyCallsAndTakesTheMedian) {
  // A fake clock: every call takes 10 us, so a 1 ms sample groups 100 calls.
  int total_calls = 0;
  MeasureOptions o;
  o.warmup_iterations = 3;
  o.warmup_seconds = 0;
  o.min_samples = 5;
  o.min_seconds = 0.01;
  const auto t = run_samples(
      [&](int calls) {
        total_calls += calls;
        return calls * 1e-5;
      },
      o, 1e-3);
  EXPECT_EQ(t.calls_per_sample, 100);
  EXPECT_EQ(t.samples, 10);  // 10 samples x 1 ms reach min_seconds = 10 ms
  EXPECT_DOUBLE_EQ(t.median_s, 1e-5);
  EXPECT_EQ(total_calls, 3 + 10 * 100);
}

TEST(Sampler, MedianIgnoresOutliers) {
  int sample = 0;
  MeasureOptions o;
  o.warmup_iterations = 1;
  o.warmup_seconds = 0;
  o.min_samples = 5;
  o.min_seconds = 0;
  o.max_seconds = 100;
  // The warmup call took longer than a sample's target: one more call estimates a call's cost.
  const double times[] = {1.0 /*warmup*/, 1.0 /*estimate*/, 2.0, 2.1, 50.0, 1.9, 2.0};
  const auto t = run_samples([&](int) { return times[sample++]; }, o, 1e-3);
  EXPECT_EQ(t.samples, 5);
  EXPECT_DOUBLE_EQ(t.median_s, 2.0);
  EXPECT_DOUBLE_EQ(t.min_s, 1.9);
  EXPECT_DOUBLE_EQ(t.max_s, 50.0);
}

// max_seconds bounds the sampling of a slow GEMM, the minimum count included, once one sample is
// taken (it never took effect: sampling past min_samples stopped at min_seconds, which it is at
// least).
TEST(Sampler, MaxSecondsBoundsTheSampling) {
  MeasureOptions o;
  o.warmup_iterations = 1;
  o.warmup_seconds = 0;
  o.min_samples = 10;
  o.min_seconds = 1;
  o.max_seconds = 3;
  const auto t = run_samples([](int) { return 1.0; }, o, 1e-3);  // 1 s per call
  EXPECT_EQ(t.samples, 3);
  o.max_seconds = 0;  // still one sample
  EXPECT_EQ(run_samples([](int) { return 1.0; }, o, 1e-3).samples, 1);
}

// A cold first call (a GPU kernel loaded on first use) longer than the warmup's budget ended the
// warmup alone and set one call per sample for a GEMM of 10 us: its estimate comes from a warm
// call.
TEST(Sampler, ACallsCostIsNotEstimatedFromAColdCall) {
  int calls_made = 0;
  const auto t = run_samples([&](int calls) { return calls_made++ == 0 ? 0.05 : calls * 1e-5; },
                             MeasureOptions{}, 1e-3);
  EXPECT_EQ(t.calls_per_sample, 100);
  EXPECT_DOUBLE_EQ(t.median_s, 1e-5);
}

TEST(Sampler, RejectsInconsistentOptions) {
  MeasureOptions o;
  o.min_samples = 10;
  o.max_samples = 5;
  EXPECT_THROW(run_samples([](int) { return 1.0; }, o, 1e-3), InvalidArgument);
}

MeasureOptions quick() {
  MeasureOptions o;
  o.warmup_seconds = 0.001;
  o.min_seconds = 0.005;
  o.rotation_bytes = 4 << 20;  // keep the test light; the default is 2x the LLC
  return o;
}

TEST(CblasRunner, TimesASmallGemm) {
  if (!cblas_available()) GTEST_SKIP() << "this build has no CBLAS";
  auto runner = make_cblas_runner(1);
  EXPECT_EQ(runner->backend(), "cblas");
  EXPECT_TRUE(runner->supports(DType::fp32));
  EXPECT_GT(runner->cache_bytes(), 0u);
  Gemm g;
  g.m = 64;
  g.n = 127;
  g.k = 255;
  g.batch = 2;
  g.dtype = DType::fp32;
  const auto t = runner->time(g, quick());
  EXPECT_GT(t.median_s, 0.0);
  EXPECT_LE(t.min_s, t.median_s);
  EXPECT_LE(t.median_s, t.max_s);
  EXPECT_GE(t.samples, 3);
  // One set is (64*255 + 255*127 + 64*127) * 2 batches * 4 B = 56 833 * 8 = 454 664 B; 4 MiB
  // (4 194 304 B) needs ceil(9.2) = 10 sets.
  EXPECT_EQ(t.buffer_sets, 10);
  EXPECT_EQ(t.working_set_bytes, 10u * 454664u);
}

TEST(CblasRunner, AShapeTooBigForMemoryIsSkippedAndTheSweepGoesOn) {
  if (!cblas_available()) GTEST_SKIP() << "this build has no CBLAS";
  auto runner = make_cblas_runner(1);
  // A is 2^17 x 2^17 x 2^16 fp32 elements, 4 PiB: more than any address space holds.
  auto gemms = grid_gemms({64, 1 << 17, 32}, {64}, {64}, {1}, {DType::fp32});
  gemms[1].n = gemms[1].k = 1 << 17;
  gemms[1].batch = 1 << 16;
  const auto set = run_sweep(*runner, gemms, quick());
  ASSERT_EQ(set.rows.size(), 2u);
  EXPECT_EQ(set.rows[0].gemm.m, 64);
  EXPECT_EQ(set.rows[1].gemm.m, 32);
  ASSERT_EQ(set.skipped.size(), 1u);
  EXPECT_NE(set.skipped[0].reason.find("cannot allocate"), std::string::npos)
      << set.skipped[0].reason;
}

TEST(Gemm, OperandsWhoseBytesOverflowAreRefused) {
  Gemm g;
  g.role = "huge";
  g.m = g.k = std::int64_t{1} << 32;  // A has 2^64 elements
  g.n = 1;
  try {
    g.validate();
    FAIL() << "a GEMM whose A has 2^64 elements was accepted";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("operand A"), std::string::npos) << message;
    EXPECT_NE(message.find("'huge'"), std::string::npos) << message;
  }
  g.m = g.k = std::int64_t{1} << 20;  // 2^40 elements: fits
  EXPECT_NO_THROW(g.validate());
}

TEST(OperandLayout, EveryOperandOfEverySetIsAligned) {
  // bf16 m = n = 2047, k = 1024: A and B are 4 192 256 B (2 B past a multiple of 256), C 8 380 418.
  const std::size_t a = 2047 * 1024 * 2, b = a, c = 2047 * 2047 * 2;
  const auto l = operand_layout(a, b, c, 256);
  EXPECT_EQ(l.a, 0u);
  EXPECT_GE(l.b, a);
  EXPECT_GE(l.c, l.b + b);
  EXPECT_GE(l.set_bytes, l.c + c);
  EXPECT_LT(l.set_bytes, a + b + c + 3 * 256);
  for (std::size_t set = 0; set < 6; ++set) {
    for (std::size_t offset : {l.a, l.b, l.c})
      EXPECT_EQ((set * l.set_bytes + offset) % 256, 0u) << "set " << set << " offset " << offset;
  }
  // Already aligned sizes are packed as before.
  const auto packed = operand_layout(512, 1024, 256, 256);
  EXPECT_EQ(packed.b, 512u);
  EXPECT_EQ(packed.c, 1536u);
  EXPECT_EQ(packed.set_bytes, 1792u);
}

TEST(CblasRunner, UnsupportedDtypeNamesItAndTheBackend) {
  if (!cblas_available()) GTEST_SKIP() << "this build has no CBLAS";
  auto runner = make_cblas_runner(1);
  Gemm g;
  g.m = g.n = g.k = 64;
  g.dtype = DType::fp8;
  try {
    runner->time(g, quick());
    FAIL() << "fp8 accepted by the CBLAS runner";
  } catch (const UnsupportedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("fp8"), std::string::npos) << message;
    EXPECT_NE(message.find("cblas"), std::string::npos) << message;
  }
}

// OpenBLAS's thread count belongs to the process: a runner made after this one (the local
// device's peak probe) must not change the threads this one times with.
TEST(CblasRunner, TimesWithItsOwnThreadCount) {
  if (!cblas_available()) GTEST_SKIP() << "this build has no CBLAS";
#ifndef OPENBLAS_VERSION
  GTEST_SKIP() << "the BLAS is not OpenBLAS: no process-wide thread count to check";
#else
  auto mine = make_cblas_runner(3);
  auto later = make_cblas_runner(1);
  Gemm g;
  g.m = g.n = g.k = 32;
  g.dtype = DType::fp32;
  (void)mine->time(g, quick());
  EXPECT_EQ(openblas_get_num_threads(), 3);
  (void)later->time(g, quick());
  EXPECT_EQ(openblas_get_num_threads(), 1);
#endif
}

// One call's bytes at the widths the library uses; the GB/s column reads them.
TEST(CblasRunner, RecordsTheBytesOfOneCall) {
  if (!cblas_available()) GTEST_SKIP() << "this build has no CBLAS";
  auto runner = make_cblas_runner(1);
  Gemm g;
  g.m = 64;
  g.n = 127;
  g.k = 255;
  g.dtype = DType::fp32;
  const auto t = runner->time(g, quick());
  EXPECT_EQ(t.call_bytes, static_cast<std::size_t>(g.bytes()));  // fp32 in and out
  if (runner->supports(DType::bf16)) {
    g.dtype = DType::bf16;
    const auto b = runner->time(g, quick());
    // bf16 A and B, fp32 C (cblas_sbgemm): 2 x (64*255 + 255*127) + 4 x 64*127.
    EXPECT_EQ(b.call_bytes, 2u * (64 * 255 + 255 * 127) + 4u * 64 * 127);
    EXPECT_EQ(b.working_set_bytes, b.call_bytes * static_cast<std::size_t>(b.buffer_sets));
  }
}

TEST(CublasLtRunner, WithoutADeviceFailsClearly) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present; see mcr_gemm_gpu_tests";
  EXPECT_THROW(make_cublaslt_runner(0), UnsupportedError);
}

}  // namespace
}  // namespace mcr::codesign::bench
