// Benchmark and tuning engine behind `mcr bench` and `mcr tune`: nccl-tests bandwidth conventions,
// verifiable buffers for every operation, timed loops, and tuning-table construction (winner per
// size with a hysteresis margin, adjacent sizes merged). See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/communicator.hpp"
#include "mcr/device_buffer.hpp"
#include "mcr/selection.hpp"
#include "mcr/types.hpp"
#include "mcr/work.hpp"

namespace mcr::bench {

// ---- bandwidth (nccl-tests conventions; S = the op's byte count, docs/tuning-format.md)
// ----------

/// busbw / algbw: 2(n-1)/n for all_reduce; (n-1)/n for all_gather(v), reduce_scatter,
/// all_to_all(v), gather and scatter; 1 for broadcast, reduce, send/recv and barrier (nccl-tests
/// src/*.cu).
double bus_factor(OpType op, int ranks) noexcept;
/// S / t in GB/s (1e9 bytes per second); 0 when `seconds` is not positive.
double algbw_gbps(std::size_t bytes, double seconds) noexcept;
/// algbw * bus_factor.
double busbw_gbps(OpType op, std::size_t bytes, double seconds, int ranks) noexcept;

// ---- what can be benchmarked -------------------------------------------------------------------

/// Every operation the benchmark runs. `send` stands for a matched send/recv pair: each rank sends
/// to rank+1 and receives from rank-1 (the nccl-tests sendrecv pattern).
std::vector<OpType> benchmark_ops();
/// An op name as in the API; "recv" and "send_recv" mean `send`. Throws InvalidArgument naming
/// `argument` and the value.
OpType parse_bench_op(std::string_view name, std::string_view argument = "--op");
/// Whether the op has a root rank (broadcast, reduce, gather, scatter).
bool has_root(OpType op) noexcept;
/// Whether an in-place form exists (every op except send/recv and barrier).
bool has_in_place(OpType op) noexcept;

/// begin, begin*factor, ... up to end (inclusive). Throws InvalidArgument on begin > end, factor <
/// 2 with begin == 0, or factor <= 1.
std::vector<std::size_t> geometric_sizes(std::size_t begin, std::size_t end, double factor);

// ---- one benchmark point -----------------------------------------------------------------------

/// Buffer layout for a nominal byte count: element counts per rank and the op's actual byte count
/// (the nominal size rounded so every rank holds a whole number of elements, at least one).
struct Layout {
  std::size_t in_count = 0;   ///< elements in the input buffer of this rank
  std::size_t out_count = 0;  ///< elements in the output buffer of this rank
  std::size_t chunk = 0;      ///< per-rank slot for chunked ops, else the message count
  std::size_t bytes = 0;      ///< the op's byte count S (equal on every rank)
};
Layout layout_for(OpType op, std::size_t nominal_bytes, DType dtype, int ranks);
/// The nominal sizes whose actual byte counts differ (the first of each), so that rounding (e.g.
/// 4 B and 8 B all_gather of f32 on 2 ranks are both 8 B) does not measure a point twice.
std::vector<std::size_t> distinct_sizes(OpType op, const std::vector<std::size_t>& nominal,
                                        DType dtype, int ranks);

/// The value at element `index` of rank `rank`'s input: a small integer (in [-6, 6], or [0, 12] for
/// u8) so that sums over up to 21 ranks are exact in every dtype, f16/bf16/i8 included.
double pattern_value(std::uint64_t seed, int rank, std::size_t index, DType dtype) noexcept;

struct PointConfig {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t nominal_bytes = 4;
  bool in_place = false;
  int root = 0;
  ReduceOp reduce = ReduceOp::sum;
  bool async = false;
  std::uint64_t seed = 1;
  Device device =
      Device::cpu();  ///< cuda: buffers in device memory (filled and checked on the host)
};

/// "cpu", or "cuda": this rank's GPU (local rank modulo the devices visible). Throws
/// InvalidArgument naming --device when the build has no CUDA or no device is present.
Device bench_device(std::string_view kind);

/// Buffers of one (op, dtype, size, place) on this rank, allocated once and reused across backends
/// and iterations. Every method is collective over the communicator except `layout()`.
class Point {
 public:
  /// Throws InvalidArgument for a root out of range, a reduce op invalid for the dtype, or an op
  /// without an in-place form when in_place is set.
  Point(Communicator comm, const PointConfig& config);
  ~Point() = default;
  Point(const Point&) = delete;
  Point& operator=(const Point&) = delete;

  const Layout& layout() const noexcept { return layout_; }
  const PointConfig& config() const noexcept { return config_; }
  Communicator comm() const { return comm_; }

  /// Runs the op `iterations` times on `backend` ("" = automatic selection) and returns this rank's
  /// seconds per iteration. Async form: issues every iteration, then waits for all handles inside
  /// the timed region. Throws UnsupportedError (identically on every rank) if the backend cannot.
  double time(std::string_view backend, int iterations);
  /// Resets the inputs, runs the op once on `backend`, and returns this rank's wrong elements.
  std::size_t verify(std::string_view backend);

 private:
  void fill();
  void run_once(const CallOptions& opts, std::vector<Work>& pending);
  std::size_t count_wrong() const;

  Communicator comm_;
  PointConfig config_;
  Layout layout_;
  void to_device();
  void from_device();
  void device_sync() const;

  std::vector<std::byte> in_;  ///< host data (the device copy's staging area when on a GPU)
  std::vector<std::byte> out_;
  DeviceBuffer device_in_;  ///< device buffers when config.device is cuda
  DeviceBuffer device_out_;
  std::vector<std::size_t> counts_;  ///< per-rank counts for the _v forms (all equal)
  std::vector<Work> pending_;
};

enum class TimeReduce { max, min, avg };
TimeReduce parse_time_reduce(std::string_view name);  ///< throws InvalidArgument
/// Reduces each value across the ranks of `comm` (max, min or mean). Collective.
std::vector<double> reduce_across(Communicator& comm, std::vector<double> values, TimeReduce how);
/// Sum of a count across ranks. Collective.
std::uint64_t sum_across(Communicator& comm, std::uint64_t value);
/// Median of the values (mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

/// The median of paired ratios numerator[i] / denominator[i] (pairs up to the shorter vector;
/// pairs with a non-positive denominator are left out), with a distribution-free 95% confidence
/// interval: the order statistics of the sorted ratios at ranks (n -+ 1.96 sqrt(n)) / 2 (the normal
/// approximation of the binomial count below the median). Fewer than 6 pairs give [min, max].
struct RatioEstimate {
  double median = 0;
  double low = 0;  ///< 95% confidence interval of the median
  double high = 0;
  std::size_t pairs = 0;
  /// Half the interval's width relative to the median (0.02 = the median is known within ~2%).
  [[nodiscard]] double relative_half_width() const noexcept {
    return median > 0 ? (high - low) / (2 * median) : 0.0;
  }
};
RatioEstimate paired_ratio(const std::vector<double>& numerators,
                           const std::vector<double>& denominators);

/// One backend's result at a point, measured by measure_interleaved().
struct BackendTiming {
  std::string backend;    ///< "" = automatic selection
  bool supported = true;  ///< false: the backend cannot run this op/dtype (nothing was timed)
  int iterations = 0;     ///< per repetition, equal on every rank
  double seconds = 0;     ///< median over repetitions of the max-across-ranks time per iteration
  std::vector<double> repetitions;  ///< max-across-ranks time per iteration of each repetition
  std::uint64_t wrong = 0;          ///< wrong elements over all ranks in the check after timing
};
struct InterleavedOptions {
  int repetitions = 5;
  int warmup = 2;
  double repetition_budget_s = 0.01;  ///< iterations per repetition ~ budget / probed time
  int max_iterations = 2000;
  /// When > 0: repetitions are raised from `repetitions` up to `max_repetitions` to fill about
  /// this many seconds per point (more repetitions where they are cheap, i.e. small messages).
  double point_budget_s = 0;
  int max_repetitions = 0;
  /// Optional: after those rounds, called with the results so far; returns the indices of the
  /// backends that need more rounds (none: precise enough; a backend once left out is not taken
  /// back). Further rounds of only those run in
  /// batches of `extra_batch` while it asks and `extra_budget_s` of probed time lasts. It sees
  /// max-across-ranks times, identical on every rank, and must decide from them alone so that
  /// every rank runs the same rounds. Repetition r of every backend ran in round r; a backend
  /// left out of the later rounds has fewer repetitions.
  std::function<std::vector<std::size_t>(const std::vector<BackendTiming>&)> more_rounds;
  double extra_budget_s = 0;
  int extra_batch = 8;
};
/// Times every backend at one point in rounds (one repetition of each backend per round, in a new
/// order each round), so load that drifts during the run hits every backend alike. Each backend's
/// iteration count comes from a probe after its warmup: timed runs grown until one lasts a quarter
/// of `repetition_budget_s`, reduced across ranks so every rank runs the same number. Then
/// `more_rounds`, if set, and finally one check of each backend's result. Collective.
std::vector<BackendTiming> measure_interleaved(Point& point,
                                               const std::vector<std::string>& backends,
                                               const InterleavedOptions& options);

// ---- tuning tables -----------------------------------------------------------------------------

/// Winner per measured size, switching away from the current winner (walking sizes upwards) only
/// when another backend is faster by more than `hysteresis` (0.03 = 3%); then adjacent sizes with
/// the same winner are merged. A byte count between two measured sizes goes to the backend of the
/// nearer one on a log scale (boundary at the geometric mean). The first range starts at 0 and the
/// last is unbounded. The `send` entry is copied to `recv`: both ends of a message must agree.
std::vector<TuningEntry> build_entries(const std::vector<TuningSample>& samples, double hysteresis);

/// Every problem of a tuning table file's text: JSON structure, unknown ops, backends and dtype
/// classes (all of them, not only the first), then TuningTable::validate() (gaps, overlaps,
/// duplicates). Empty when the table is valid.
std::vector<std::string> validate_table_text(std::string_view json_text);

/// Provenance of a table measured on `comm`: hosts, ranks, ranks per host, CPU model, library
/// versions, usable backends, UTC date and `command`. Collective.
std::map<std::string, std::string> provenance(Communicator& comm, const std::string& command);

}  // namespace mcr::bench
