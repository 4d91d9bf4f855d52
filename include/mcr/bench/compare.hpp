// Automatic selection against every single backend (`mcr bench --compare-auto`): at each point,
// auto and every usable backend are timed interleaved on the same buffers, and the best single
// backend's time over auto's is estimated with a 95% interval. Results come back as structs;
// progress is reported through callbacks. See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mcr/bench/measure.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::bench {

// How a point is measured (docs/bench.md): each repetition lasts about 5 ms, even for 0.1 us
// operations; as many rounds as ~0.6 s per point allows, up to 61; then rounds of auto and the
// contenders (within 10% of the best) in batches of 8 until the ratio is precise enough.
inline constexpr double kCompareRepetitionBudgetS = 0.005;
inline constexpr int kCompareMaxIterations = 100000;
inline constexpr double kComparePointBudgetS = 0.6;
inline constexpr int kCompareMaxRepetitions = 61;
inline constexpr int kCompareExtraBatch = 8;
inline constexpr double kCompareContenderMargin = 1.1;

/// Each field mirrors the `mcr bench --compare-auto` flag named in its comment. Errors name the
/// field: options.<field> for those the sweep and tuning share (ops, sizes, dtypes, root, reduce,
/// device), compare.<field> for the others.
struct CompareOptions {
  /// --op: the default is the ops a tuning table usually decides.
  std::vector<OpType> ops{OpType::all_reduce, OpType::all_gather, OpType::reduce_scatter,
                          OpType::all_to_all, OpType::broadcast};
  std::vector<std::size_t> sizes;         ///< nominal sizes in bytes (-b/-e/-f or --sizes)
  std::vector<DType> dtypes{DType::f32};  ///< --dtype
  int warmup = 5;                         ///< -w (at least 1 is run)
  int root = 0;                           ///< --root
  ReduceOp reduce = ReduceOp::sum;        ///< --reduce
  std::uint64_t seed = 1;                 ///< --seed
  Device device = Device::cpu();          ///< --device
  bool in_place = false;                  ///< --place in (ops without an in-place form: out)
  bool async = false;                     ///< --async: the i* forms, each waited inside the timing
  int repetitions = 9;        ///< --reps: least rounds per point (more where the budget allows)
  double min_ratio = 0.95;    ///< --min-ratio: a point "meets" the target at ratio >= this
  double precision = 0.015;   ///< --precision: wanted relative half-width of the ratio's interval
  double extra_budget_s = 4;  ///< --extra-budget: probed seconds per point for the extra rounds
};

/// One point: auto and every backend, with the ratio best/auto. Identical on every rank.
struct ComparePoint {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t bytes = 0;     ///< the op's byte count S
  std::string auto_backend;  ///< what automatic selection chose here
  /// timings[0] is auto; timings[v] the backend CompareResult::backends[v - 1].
  std::vector<BackendTiming> timings;
  std::size_t best = 0;  ///< index in timings of the best single backend; 0 when none ran
  /// Median over rounds of best's time / auto's time in the same round (>= 1: auto is at least as
  /// fast), with its 95% interval; all zero when no single backend ran.
  RatioEstimate ratio;
  bool met = false;  ///< ratio.median >= min_ratio

  /// The best single backend's name, or "-" when none ran.
  [[nodiscard]] std::string best_backend() const;
  /// The best single backend's seconds per iteration, or 0 when none ran.
  [[nodiscard]] double best_seconds() const noexcept;
};

struct CompareResult {
  std::vector<std::string> backends;  ///< the single backends compared, in timings order
  std::vector<ComparePoint> points;
  std::size_t met = 0;      ///< points with met set
  std::uint64_t wrong = 0;  ///< wrong elements over every variant and point
};

/// Progress of run_compare(), called on every rank. Any may be empty.
struct CompareCallbacks {
  std::function<void(OpType, DType)> on_group;        ///< before the sizes of an (op, dtype)
  std::function<void(const ComparePoint&)> on_point;  ///< as each point completes
};

/// The index (>= 1) of the fastest single backend (lowest median) in `timings`, where timings[0]
/// is auto; 0 when none is supported.
std::size_t best_single(const std::vector<BackendTiming>& timings);

/// The interleaving used at each point: the constants above, options' repetitions, warmup and
/// extra budget, and extra rounds of auto and the backends within kCompareContenderMargin of the
/// best until best/auto is known within `precision` (95%).
InterleavedOptions compare_interleaved_options(const CompareOptions& options);

/// Throws InvalidArgument naming the field, the value and the rule for: no op, size or dtype,
/// repetitions < 1, precision < 0, extra_budget_s < 0, a root outside [0, ranks) for a rooted op,
/// a reduce operator other than sum, min and max for a reduction.
void check_compare_options(const CompareOptions& options, int ranks);

/// Runs the comparison on `world` (collective: every rank calls it with the same options) against
/// every backend usable on it. send/recv is left out on 1 rank.
CompareResult run_compare(Communicator& world, const CompareOptions& options,
                          const CompareCallbacks& callbacks = {});

}  // namespace mcr::bench
