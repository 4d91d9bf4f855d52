// Needs a CUDA GPU; skips (does not fail) without one.
#include <gtest/gtest.h>

#include "mcr/gemmbench/gpu_info.hpp"
#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {
namespace {

bool have_gpu() {
  return cublaslt_available() && cuda_device_count() > 0;
}

TEST(GpuRunner, TimesBf16AndBatchedGemms) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device (or a build without CUDA): GPU test skipped";
  const auto info = detect_gpu(0);
  ASSERT_TRUE(info.has_value());
  EXPECT_GT(info->sm_count, 0);
  EXPECT_GT(info->l2_bytes, 0);
  auto runner = make_cublaslt_runner(0);
  MeasureOptions o;
  o.min_seconds = 0.02;
  Gemm g;
  g.m = g.n = g.k = 4096;
  g.dtype = DType::bf16;
  const auto t = runner->time(g, o);
  const double tflops = g.flops() / t.median_s / 1e12;
  // Any data-center GPU of the last decade exceeds 10 TFLOP/s on a 4096^3 bf16 GEMM (V100 fp16
  // ~100).
  EXPECT_GT(tflops, 10.0) << runner->description();
  EXPECT_GE(t.working_set_bytes, 2 * runner->cache_bytes());

  Gemm bmm;
  bmm.m = bmm.n = 2048;
  bmm.k = 128;
  bmm.batch = 16;
  bmm.dtype = DType::fp16;
  EXPECT_GT(runner->time(bmm, o).median_s, 0.0);
}

TEST(GpuRunner, Fp8WhereSupported) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: GPU test skipped";
  auto runner = make_cublaslt_runner(0);
  if (!runner->supports(DType::fp8)) GTEST_SKIP() << "fp8 needs sm_89 or newer";
  Gemm g;
  g.m = g.n = g.k = 4096;
  g.dtype = DType::fp8;
  MeasureOptions o;
  o.min_seconds = 0.02;
  EXPECT_GT(runner->time(g, o).median_s, 0.0);
}

}  // namespace
}  // namespace mcr::codesign::bench
