// The GEMM benchmark's GPU entry points in a build without cuBLASLt: no device, and a runner
// request refused with the reason.
#include "mcr/errors.hpp"
#include "mcr/gemmbench/gpu_info.hpp"
#include "mcr/gemmbench/runner.hpp"

namespace mcr::codesign::bench {

bool cublaslt_available() {
  return false;
}

int cuda_device_count() {
  return 0;
}

std::unique_ptr<GemmRunner> make_cublaslt_runner(int /*device*/) {
  throw UnsupportedError(
      "this build of mcr has no cuBLASLt support: reconfigure with the CUDA toolkit "
      "(MCR_WITH_CUDA, MCR_WITH_CUBLASLT)");
}

std::optional<GpuInfo> detect_gpu(int /*index*/) {
  return std::nullopt;
}

}  // namespace mcr::codesign::bench
