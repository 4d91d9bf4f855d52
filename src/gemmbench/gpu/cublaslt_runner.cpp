// cuBLASLt runner. Layout follows the common "TN" case, which every dtype including fp8 supports:
// column-major A stored K x M and used transposed, B stored K x N, C and D M x N. A batched GEMM is
// one strided-batched cublasLtMatmul call. Times come from CUDA events around back-to-back
// launches.
#include <fmt/core.h>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/gpu_info.hpp"
#include "mcr/gemmbench/runner.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "mcr/gemmbench/sampler.hpp"

namespace mcr::codesign::bench {

bool cublaslt_available() {
  return true;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

namespace {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw BackendError(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                   cudaGetErrorName(status), cudaGetErrorString(status)));
  }
}
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw BackendError(fmt::format("{} failed at {}:{}: {} (cuBLASLt {})", call, file, line,
                                   cublasLtGetStatusString(status), cublasLtGetVersion()));
  }
}
#define MCR_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)
#define MCR_CUBLAS_CHECK(call) check_cublas((call), #call, __FILE__, __LINE__)

/// Data and compute types cuBLASLt uses for one of our dtypes.
struct LtTypes {
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

std::optional<LtTypes> lt_types(DType dtype) {
  switch (dtype) {
    case DType::fp64:
      return LtTypes{CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::fp32:  // true fp32 math, no TF32 shortcut
      return LtTypes{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::tf32:
      return LtTypes{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
    case DType::fp16:  // fp32 accumulation, as frameworks use
      return LtTypes{CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::bf16:
      return LtTypes{CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::fp8:  // e4m3 inputs, bf16 output (Hopper and later)
      return LtTypes{CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default:
      return std::nullopt;
  }
}

/// Owns a device allocation.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    const cudaError_t status = cudaMalloc(&ptr_, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not a sticky error: clear it so later calls go on
      // A shape too big for the device: a sweep skips it and goes on (run_sweep).
      throw UnsupportedError(fmt::format("cannot allocate {:.2f} GiB of operands on the device",
                                         static_cast<double>(bytes) / (1 << 30)));
    }
    check_cuda(status, "cudaMalloc", __FILE__, __LINE__);
    // 0x3C in every byte is a small, finite value in each type (fp32 ~0.0115, fp16 ~1.06,
    // bf16 ~0.0115, e4m3 1.5), so no NaN/Inf slow paths and no all-zero power shortcut.
    try {
      MCR_CUDA_CHECK(cudaMemset(ptr_, 0x3C, bytes));
    } catch (...) {
      cudaFree(ptr_);  // the destructor of a throwing constructor never runs
      throw;
    }
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

template <typename T, auto Destroy>
struct LtHandle {
  T handle = nullptr;
  LtHandle() = default;
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  ~LtHandle() {
    if (handle) Destroy(handle);
  }
};

class CublasLtRunner final : public GemmRunner {
 public:
  explicit CublasLtRunner(int device) : device_(device) {
    const auto info = detect_gpu(device);
    if (!info) {
      throw UnsupportedError(
          fmt::format("no CUDA device {} (found {}): the cublaslt backend needs a GPU", device,
                      cuda_device_count()));
    }
    gpu_ = *info;
    MCR_CUDA_CHECK(cudaSetDevice(device_));
    MCR_CUBLAS_CHECK(cublasLtCreate(&lt_.handle));
    MCR_CUDA_CHECK(cudaStreamCreate(&stream_));
    MCR_CUDA_CHECK(cudaEventCreate(&start_));
    MCR_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CublasLtRunner() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }
  CublasLtRunner(const CublasLtRunner&) = delete;
  CublasLtRunner& operator=(const CublasLtRunner&) = delete;

  std::string backend() const override { return "cublaslt"; }
  std::string description() const override {
    return fmt::format("cuBLASLt {} on {} (sm_{}{}, {} SMs, {:.0f} MHz max)", cublasLtGetVersion(),
                       gpu_.name, gpu_.cc_major, gpu_.cc_minor, gpu_.sm_count, gpu_.max_clock_mhz);
  }
  bool supports(DType dtype) const override {
    if (dtype == DType::fp8) return gpu_.cc_major * 10 + gpu_.cc_minor >= 89;
    return lt_types(dtype).has_value();
  }
  std::size_t cache_bytes() const override { return static_cast<std::size_t>(gpu_.l2_bytes); }

  Timing time(const Gemm& g, const MeasureOptions& options) override {
    check(g);
    if (!supports(g.dtype)) {
      throw UnsupportedError(fmt::format("dtype {} is not supported by the cublaslt backend on {}",
                                         to_string(g.dtype), gpu_.name));
    }
    if (options.clock != Clock::wall) {
      throw InvalidArgument(
          "clock 'cpu' applies to the CPU backend only; GPU runs use CUDA events");
    }
    if (g.batch > std::numeric_limits<std::int32_t>::max()) {
      throw InvalidArgument(
          fmt::format("GEMM m={} n={} k={}: batch {} exceeds cuBLASLt's batch count (at most {})",
                      g.m, g.n, g.k, g.batch, std::numeric_limits<std::int32_t>::max()));
    }
    const LtTypes types = *lt_types(g.dtype);
    MCR_CUDA_CHECK(cudaSetDevice(device_));

    // The same widths Gemm::bytes() counts, so the reported bandwidth is the traffic allocated
    // here.
    const auto in_width = static_cast<std::size_t>(dtype_bytes(g.dtype));
    const auto out_width = static_cast<std::size_t>(dtype_output_bytes(g.dtype));
    const auto a_bytes = static_cast<std::size_t>(g.m * g.k * g.batch) * in_width;
    const auto b_bytes = static_cast<std::size_t>(g.k * g.n * g.batch) * in_width;
    const auto c_bytes = static_cast<std::size_t>(g.m * g.n * g.batch) * out_width;
    const OperandLayout at = operand_layout(a_bytes, b_bytes, c_bytes, kOperandAlignment);
    const std::size_t set_bytes = at.set_bytes;
    const std::size_t target =
        options.rotation_bytes > 0 ? options.rotation_bytes : 2 * cache_bytes();
    const int sets = rotation_sets(set_bytes, target, options.max_buffer_sets);
    DeviceBuffer buffers(set_bytes * static_cast<std::size_t>(sets));
    DeviceBuffer workspace(kWorkspaceBytes);

    LtHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> op;
    MCR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.handle, types.compute, types.scale));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    MCR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.handle, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &trans_a, sizeof trans_a));
    MCR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.handle, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &trans_b, sizeof trans_b));
    LtHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> la, lb, lc;
    make_layout(la, types.ab, g.k, g.m, g.batch);
    make_layout(lb, types.ab, g.k, g.n, g.batch);
    make_layout(lc, types.cd, g.m, g.n, g.batch);

    LtHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> pref;
    MCR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.handle));
    const std::size_t ws = kWorkspaceBytes;
    MCR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    const cublasStatus_t lookup =
        cublasLtMatmulAlgoGetHeuristic(lt_.handle, op.handle, la.handle, lb.handle, lc.handle,
                                       lc.handle, pref.handle, 1, &heuristic, &found);
    // No algorithm for the shape is said either way: no result, or (fp8 dims that are not
    // multiples of 16, on current cuBLASLt) CUBLAS_STATUS_NOT_SUPPORTED. Both skip the shape;
    // any other status is an error.
    if (lookup != CUBLAS_STATUS_NOT_SUPPORTED) {
      check_cublas(lookup, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    }
    if (lookup == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) {
      throw UnsupportedError(fmt::format(
          "cuBLASLt has no algorithm for {} m={} n={} k={} batch={} on {} (fp8 needs dims that are "
          "multiples of 16)",
          to_string(g.dtype), g.m, g.n, g.k, g.batch, gpu_.name));
    }

    const double alpha64 = 1.0, beta64 = 0.0;
    const float alpha32 = 1.0F, beta32 = 0.0F;
    const void* alpha = types.scale == CUDA_R_64F ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = types.scale == CUDA_R_64F ? static_cast<const void*>(&beta64) : &beta32;

    int next_set = 0;
    auto launch = [&] {
      char* base = buffers.get() + static_cast<std::size_t>(next_set) * set_bytes;
      next_set = (next_set + 1) % sets;
      char* a = base + at.a;
      char* b = base + at.b;
      char* c = base + at.c;
      MCR_CUBLAS_CHECK(cublasLtMatmul(lt_.handle, op.handle, alpha, a, la.handle, b, lb.handle,
                                      beta, c, lc.handle, c, lc.handle, &heuristic.algo,
                                      workspace.get(), kWorkspaceBytes, stream_));
    };
    auto run_calls = [&](int calls) {
      MCR_CUDA_CHECK(cudaEventRecord(start_, stream_));
      for (int i = 0; i < calls; ++i)
        launch();
      MCR_CUDA_CHECK(cudaEventRecord(stop_, stream_));
      MCR_CUDA_CHECK(cudaEventSynchronize(stop_));
      float ms = 0;
      MCR_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
      return static_cast<double>(ms) * 1e-3;
    };
    // Samples of about 2 ms: long enough for event resolution (~0.5 us) and launch queueing.
    auto timing = run_samples(run_calls, options, 2e-3);
    timing.buffer_sets = sets;
    timing.working_set_bytes = set_bytes * static_cast<std::size_t>(sets);
    timing.call_bytes = static_cast<std::size_t>(g.bytes());  // C at dtype_output_bytes' width
    return timing;
  }

 private:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's advice for Hopper
  // cuBLASLt's default assumption for operand pointers (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*).
  static constexpr std::size_t kOperandAlignment = 256;

  template <typename Handle>
  static void make_layout(Handle& layout, cudaDataType_t type, std::int64_t rows, std::int64_t cols,
                          std::int64_t batch) {
    MCR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout.handle, type,
                                                static_cast<std::uint64_t>(rows),
                                                static_cast<std::uint64_t>(cols), rows));
    if (batch > 1) {
      const auto count = static_cast<std::int32_t>(batch);
      const std::int64_t stride = rows * cols;
      MCR_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout.handle, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      MCR_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout.handle, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }

  int device_;
  GpuInfo gpu_;
  LtHandle<cublasLtHandle_t, cublasLtDestroy> lt_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace

std::unique_ptr<GemmRunner> make_cublaslt_runner(int device) {
  return std::make_unique<CublasLtRunner>(device);
}

}  // namespace mcr::codesign::bench
