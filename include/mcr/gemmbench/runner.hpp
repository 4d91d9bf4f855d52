// GEMM runners: time one GEMM (or batched GEMM) on a real device with a fixed method —
// allocation up front, warmup, buffer rotation so the working set exceeds the last-level cache,
// timed samples until a minimum count and duration are reached, median of the samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "mcr/codesign/dtype.hpp"
#include "mcr/codesign/gemm.hpp"

namespace mcr::codesign::bench {

/// What a sample's duration is measured with.
enum class Clock {
  wall,  ///< steady wall clock (CPU) or CUDA events (GPU): the default, what users experience
  /// CPU time of this process (CBLAS with one thread only). Time the process spends descheduled is
  /// left out, so a GEMM can be timed on a machine that other jobs keep busy.
  process_cpu,
};
std::string to_string(Clock clock);
/// "wall" or "cpu"; throws mcr::InvalidArgument otherwise.
Clock parse_clock(std::string_view name);

struct MeasureOptions {
  int warmup_iterations = 1;     ///< untimed calls before the first sample (at least this many)
  double warmup_seconds = 0.02;  ///< ...and at least this long, so clocks and thread pools settle
  int min_samples = 3;           ///< timed samples taken at least (unless max_seconds ends them)
  int max_samples = 1000;        ///< and at most
  double min_seconds = 0.1;      ///< keep sampling until this much time was measured
  double max_seconds = 3.0;  ///< stop sampling once this much was timed, after one sample at least
  /// Total bytes of rotated A/B/C copies to cycle through; 0 means 2 x the last-level cache.
  std::size_t rotation_bytes = 0;
  /// Largest number of rotated buffer sets (bounds host/device memory for tiny GEMMs).
  int max_buffer_sets = 4096;
  Clock clock = Clock::wall;
};

/// What one timing produced. Times are per GEMM call (a batched GEMM counts as one call).
struct Timing {
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  int samples = 0;
  int calls_per_sample = 1;  ///< tiny GEMMs are timed in groups to rise above timer resolution
  int buffer_sets = 1;       ///< rotated copies of A, B and C
  std::size_t working_set_bytes = 0;  ///< buffer_sets x (A + B + C) bytes
  /// A, B and C of one call at the widths the library reads and writes them (OpenBLAS's bf16
  /// GEMM writes fp32 C, where Gemm::bytes() counts bf16); 0 where not recorded (older files):
  /// Gemm::bytes() stands in.
  std::size_t call_bytes = 0;
};

/// One backend (CBLAS on the host, cuBLASLt on a GPU).
class GemmRunner {
 public:
  virtual ~GemmRunner() = default;
  /// "cblas" or "cublaslt".
  virtual std::string backend() const = 0;
  /// Human-readable library and device, e.g. "OpenBLAS 0.3.21 Haswell, 2 threads".
  virtual std::string description() const = 0;
  virtual bool supports(DType dtype) const = 0;
  /// Bytes of the last-level cache the rotation has to defeat (host LLC or GPU L2).
  virtual std::size_t cache_bytes() const = 0;
  /// Throws mcr::InvalidArgument when `gemm` cannot be timed on this backend whatever the device
  /// (a dimension not positive, operand bytes past 64 bits, a size past the library's index
  /// range): called for every GEMM of a sweep before the first one runs, and by time().
  virtual void check(const Gemm& gemm) const { gemm.validate(); }
  /// Times `gemm`. Throws mcr::UnsupportedError for a dtype the backend lacks, mcr::BackendError
  /// when the library fails.
  virtual Timing time(const Gemm& gemm, const MeasureOptions& options) = 0;
};

/// Whether this build has the CBLAS runner / the cuBLASLt runner.
bool cblas_available();
bool cublaslt_available();
/// Number of CUDA devices visible now (0 without CUDA support, a driver or a device).
int cuda_device_count();

/// CBLAS runner using `threads` BLAS threads (0: all CPUs this process may use).
/// Throws mcr::UnsupportedError when the build has no CBLAS.
std::unique_ptr<GemmRunner> make_cblas_runner(int threads = 0);
/// cuBLASLt runner on CUDA device `device`. Throws mcr::UnsupportedError without CUDA support or
/// without a device, saying which.
std::unique_ptr<GemmRunner> make_cublaslt_runner(int device = 0);

/// Number of rotated buffer sets so that sets x set_bytes >= target_bytes, clamped to
/// [1, max_sets]. Pure; exposed for tests.
int rotation_sets(std::size_t set_bytes, std::size_t target_bytes, int max_sets);

/// Where A, B and C lie in one rotated buffer set, each rounded up to `alignment` bytes, and the
/// set's size, a multiple of `alignment` too, so that every set's operands are aligned as well.
/// cuBLASLt chooses its algorithm assuming 256-byte aligned operands unless told otherwise; an
/// operand at a 2-byte offset would be timed with an algorithm chosen for another case.
struct OperandLayout {
  std::size_t a = 0, b = 0, c = 0;  ///< byte offsets in a set
  std::size_t set_bytes = 0;
};
/// Pure; exposed for tests. `alignment` must be a power of two.
OperandLayout operand_layout(std::size_t a_bytes, std::size_t b_bytes, std::size_t c_bytes,
                             std::size_t alignment);

}  // namespace mcr::codesign::bench
