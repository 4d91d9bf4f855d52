// CBLAS runner (OpenBLAS): row-major C[MxN] = A[MxK] * B[KxN]; a batched GEMM is `batch` calls.
#include "mcr_build_config.hpp"

#include <fmt/core.h>

#include "mcr/errors.hpp"
#include "mcr/gemmbench/cpu_info.hpp"
#include "mcr/gemmbench/runner.hpp"

#if MCR_HAVE_BLAS
#include <cblas.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "mcr/gemmbench/sampler.hpp"
#endif

namespace mcr::codesign::bench {

bool cblas_available() {
  return MCR_HAVE_BLAS != 0;
}

#if MCR_HAVE_BLAS
namespace {

// OpenBLAS's cblas.h uses its own index type (64-bit in ILP64 builds); reference CBLAS uses int.
#ifdef OPENBLAS_VERSION
using BlasInt = blasint;
#else
using BlasInt = int;
#endif

#ifdef OPENBLAS_VERSION
// cblas_sbgemm is declared by every OpenBLAS cblas.h but only exported by builds made with
// BUILD_BFLOAT16, so it is looked up at run time instead of linked.
using SbgemmFn = decltype(&cblas_sbgemm);
SbgemmFn find_sbgemm() {
  return reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
}
#endif

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

#ifdef OPENBLAS_VERSION
std::string_view trim_spaces(std::string_view s) {  // OPENBLAS_VERSION is " OpenBLAS 0.3.21 "
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ')
    s.remove_suffix(1);
  return s;
}
#endif

/// bf16 bit pattern of a float (truncation is fine for benchmark fill values).
std::uint16_t to_bf16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

class CblasRunner final : public GemmRunner {
 public:
  explicit CblasRunner(int threads) : cpu_(detect_cpu()) {
    threads_ = threads > 0 ? threads : cpu_.cores;
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(threads_);
    sbgemm_ = find_sbgemm();
#endif
  }

  std::string backend() const override {
    return "cblas";
  }

  std::string description() const override {
#ifdef OPENBLAS_VERSION
    return fmt::format("{} ({}), {} threads on {}", trim_spaces(OPENBLAS_VERSION),
                       openblas_get_corename(), threads_, cpu_.model_name);
#else
    return fmt::format("CBLAS, {} threads on {}", threads_, cpu_.model_name);
#endif
  }

  bool supports(DType dtype) const override {
    if (dtype == DType::fp32 || dtype == DType::fp64) return true;
#ifdef OPENBLAS_VERSION
    if (dtype == DType::bf16) return sbgemm_ != nullptr;
#endif
    return false;
  }

  std::size_t cache_bytes() const override {
    const std::int64_t llc = cpu_.llc_bytes_for(threads_);
    return static_cast<std::size_t>(llc > 0 ? llc : 32 << 20);
  }

  void check(const Gemm& gemm) const override {
    gemm.validate();
    for (const auto dim : {gemm.m, gemm.n, gemm.k}) {
      if (dim > std::numeric_limits<BlasInt>::max()) {
        throw InvalidArgument(fmt::format(
            "GEMM '{}' m={} n={} k={}: dimension {} exceeds the BLAS index range ({})", gemm.role,
            gemm.m, gemm.n, gemm.k, dim, std::numeric_limits<BlasInt>::max()));
      }
    }
  }

  Timing time(const Gemm& gemm, const MeasureOptions& options) override {
    check(gemm);
#ifdef OPENBLAS_VERSION
    // OpenBLAS's thread count is the process's: another runner (the local device's peak probe)
    // may have set its own since this one was made.
    openblas_set_num_threads(threads_);
#endif
    if (!supports(gemm.dtype)) {
      throw UnsupportedError(fmt::format(
          "dtype {} is not supported by the cblas backend ({}); it runs fp32 and fp64{}",
          to_string(gemm.dtype), description(),
          gemm.dtype == DType::bf16 ? " (this OpenBLAS build does not export cblas_sbgemm)"
                                    : ", and bf16 where OpenBLAS exports cblas_sbgemm"));
    }
    if (options.clock == Clock::process_cpu && threads_ != 1) {
      // With several BLAS threads, CPU time also counts threads spinning while they wait for a
      // descheduled peer, so it would no longer measure the GEMM.
      throw InvalidArgument(fmt::format(
          "clock 'cpu' needs exactly 1 BLAS thread, the runner uses {} (request.threads 1)",
          threads_));
    }
    try {
      try {
        return time_dispatch(gemm, options);
      } catch (const std::length_error&) {  // past the vector's max_size: too big, as below
        throw std::bad_alloc();
      }
    } catch (const std::bad_alloc&) {
      // A shape too big for this machine's memory: a sweep skips it and goes on (run_sweep).
      const double gib = static_cast<double>(gemm.bytes()) / (1 << 30);
      throw UnsupportedError(
          fmt::format("GEMM m={} n={} k={} batch={}: cannot allocate its {:.1f} GiB of "
                      "operands on this machine",
                      gemm.m, gemm.n, gemm.k, gemm.batch, gib));
    }
  }

 private:
  Timing time_dispatch(const Gemm& gemm, const MeasureOptions& options) {
    switch (gemm.dtype) {
      case DType::fp32:
        return time_typed<float, float>(gemm, options);
      case DType::fp64:
        return time_typed<double, double>(gemm, options);
      default:
        return time_typed<std::uint16_t, float>(gemm, options);  // bf16 in, fp32 out
    }
  }

  template <typename In, typename Out>
  Timing time_typed(const Gemm& g, const MeasureOptions& options) {
    const auto a_elems = static_cast<std::size_t>(g.m * g.k * g.batch);
    const auto b_elems = static_cast<std::size_t>(g.k * g.n * g.batch);
    const auto c_elems = static_cast<std::size_t>(g.m * g.n * g.batch);
    const std::size_t set_bytes = (a_elems + b_elems) * sizeof(In) + c_elems * sizeof(Out);
    const std::size_t target =
        options.rotation_bytes > 0 ? options.rotation_bytes : 2 * cache_bytes();
    const int sets = rotation_sets(set_bytes, target, options.max_buffer_sets);

    // Buffers persist across GEMMs and only grow, so a sweep allocates and fills them once instead
    // of once per shape. Small positive inputs keep every product a normal number (denormals would
    // slow the FPU); A and B are never written, C only receives such products.
    auto& buf = buffers<In, Out>();
    grow(buf.a, a_elems * sets, fill_value<In>(0.01F));
    grow(buf.b, b_elems * sets, fill_value<In>(0.02F));
    grow(buf.c, c_elems * sets, Out{0});
    auto& a = buf.a;
    auto& b = buf.b;
    auto& c = buf.c;

    int next_set = 0;
    auto one_call = [&] {
      const auto s = static_cast<std::size_t>(next_set);
      next_set = (next_set + 1) % sets;
      for (std::int64_t i = 0; i < g.batch; ++i) {
        const auto ib = static_cast<std::size_t>(i);
        const In* pa = a.data() + s * a_elems + ib * static_cast<std::size_t>(g.m * g.k);
        const In* pb = b.data() + s * b_elems + ib * static_cast<std::size_t>(g.k * g.n);
        Out* pc = c.data() + s * c_elems + ib * static_cast<std::size_t>(g.m * g.n);
        gemm_call(g, pa, pb, pc);
      }
    };
    const bool cpu_clock = options.clock == Clock::process_cpu;
    auto run_calls = [&](int calls) {
      if (cpu_clock) {
        const double start = process_cpu_seconds();
        for (int i = 0; i < calls; ++i)
          one_call();
        return process_cpu_seconds() - start;
      }
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i)
        one_call();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    auto timing = run_samples(run_calls, options, 1e-3);
    timing.buffer_sets = sets;
    timing.working_set_bytes = set_bytes * static_cast<std::size_t>(sets);
    timing.call_bytes = set_bytes;  // C at Out's width (fp32 for bf16 inputs)
    return timing;
  }

  void gemm_call(const Gemm& g, const float* a, const float* b, float* c) const {
    const auto m = static_cast<BlasInt>(g.m), n = static_cast<BlasInt>(g.n),
               k = static_cast<BlasInt>(g.k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0F, a, k, b, n, 0.0F, c, n);
  }
  void gemm_call(const Gemm& g, const double* a, const double* b, double* c) const {
    const auto m = static_cast<BlasInt>(g.m), n = static_cast<BlasInt>(g.n),
               k = static_cast<BlasInt>(g.k);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  }
  void gemm_call([[maybe_unused]] const Gemm& g, [[maybe_unused]] const std::uint16_t* a,
                 [[maybe_unused]] const std::uint16_t* b, [[maybe_unused]] float* c) const {
#ifdef OPENBLAS_VERSION
    const auto m = static_cast<BlasInt>(g.m), n = static_cast<BlasInt>(g.n),
               k = static_cast<BlasInt>(g.k);
    sbgemm_(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0F, a, k, b, n, 0.0F, c, n);
#endif
  }

  template <typename In, typename Out>
  struct Buffers {
    std::vector<In> a, b;
    std::vector<Out> c;
  };
  template <typename In, typename Out>
  Buffers<In, Out>& buffers() {
    if constexpr (std::is_same_v<In, float>) {
      return fp32_buffers_;
    } else if constexpr (std::is_same_v<In, double>) {
      return fp64_buffers_;
    } else {
      return bf16_buffers_;
    }
  }
  template <typename T>
  static void grow(std::vector<T>& v, std::size_t size, T value) {
    if (v.size() < size) v.resize(size, value);
  }
  template <typename T>
  static T fill_value(float value) {
    if constexpr (std::is_same_v<T, std::uint16_t>) {
      return to_bf16_bits(value);
    } else {
      return static_cast<T>(value);
    }
  }

  CpuInfo cpu_;
  int threads_ = 1;
  Buffers<float, float> fp32_buffers_;
  Buffers<double, double> fp64_buffers_;
  Buffers<std::uint16_t, float> bf16_buffers_;
#ifdef OPENBLAS_VERSION
  SbgemmFn sbgemm_ = nullptr;
#endif
};

}  // namespace

std::unique_ptr<GemmRunner> make_cblas_runner(int threads) {
  return std::make_unique<CblasRunner>(threads);
}

#else

std::unique_ptr<GemmRunner> make_cblas_runner(int /*threads*/) {
  throw UnsupportedError("this build of mcr has no CBLAS: reconfigure with OpenBLAS installed");
}

#endif

}  // namespace mcr::codesign::bench
