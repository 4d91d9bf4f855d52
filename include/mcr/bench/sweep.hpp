// The nccl-tests-style sweep behind `mcr bench`: every (op, dtype, place, backend, size) warmed up,
// timed for at least -n iterations and at least --min-time seconds, and verified. Results come back
// as rows; progress is reported through callbacks, so the caller decides what to print and where.
// See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/bench/measure.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::bench {

/// Out-of-place, in-place, or both (out first) for every op that has an in-place form.
enum class Placement { out, in, both };
/// "out", "in" or "both"; throws InvalidArgument naming sweep.place.
Placement parse_placement(std::string_view name);

/// What to sweep and how. Each field mirrors the `mcr bench` flag named in its comment. Errors name
/// the field: options.<field> for those the comparison and tuning share (ops, sizes, dtypes, root,
/// reduce, device), sweep.<field> for the others.
struct SweepOptions {
  std::vector<OpType> ops{OpType::all_reduce};  ///< --op
  std::vector<std::size_t> sizes;               ///< nominal sizes in bytes (-b/-e/-f or --sizes)
  std::vector<DType> dtypes{DType::f32};        ///< --dtype
  /// --backend: backend names, or "auto" for automatic selection; one row each.
  std::vector<std::string> backends{"auto"};
  int iterations = 20;  ///< -n: least timed iterations per point
  int warmup = 5;       ///< -w: warmup iterations per point
  /// --min-time: least timed seconds per point. Iterations grow from -n to fill it, estimated from
  /// the point's warmup (max across ranks, so every rank runs the same count); 0 or -w 0: exactly
  /// -n. A one-off cost in a run of 20 x 1 us (how far apart the ranks leave the barrier, a first
  /// use of a path) would otherwise be part of the result.
  double min_time_s = 0.01;
  int max_iterations = 100000;        ///< cap of the iterations --min-time may ask for
  Placement place = Placement::out;   ///< --place
  int root = 0;                       ///< --root: root of the rooted ops
  ReduceOp reduce = ReduceOp::sum;    ///< --reduce
  TimeReduce time = TimeReduce::max;  ///< --time: how per-rank times are combined
  bool async = false;                 ///< --async: the i* forms, all waited inside the timing
  std::uint64_t seed = 1;             ///< --seed: seed of the verifiable data
  Device device = Device::cpu();      ///< --device (see bench_device())
};

/// One measured point of a sweep. Identical on every rank.
struct SweepRow {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  std::size_t bytes = 0;  ///< the op's byte count S
  std::size_t count = 0;  ///< elements of the op's message (per-rank chunk for chunked ops)
  int root = -1;          ///< -1 when the op has none
  bool in_place = false;
  bool async = false;
  std::string requested;  ///< the requested backend ("auto" or a name)
  std::string backend;    ///< the backend that ran (selection's choice for "auto")
  int iterations = 0;     ///< timed iterations (at least -n; more where --min-time asked for them)
  double time_us = 0;     ///< per iteration, reduced across ranks as SweepOptions::time says
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::uint64_t wrong = 0;  ///< wrong elements over all ranks
};

/// One (op, dtype, place, requested backend) of a sweep, before its sizes run.
struct SweepGroup {
  OpType op = OpType::all_reduce;
  DType dtype = DType::f32;
  bool in_place = false;
  std::string requested;
  std::size_t sizes = 0;  ///< sizes it will measure (1 for barrier)
};

/// Progress of run_sweep(), called on every rank in the order the work happens. Any may be empty.
struct SweepCallbacks {
  std::function<void(const SweepGroup&)> on_group;
  std::function<void(const SweepRow&)> on_row;  ///< as each row completes
  /// The requested backend cannot run the group's op and dtype (`reason` says why): its sizes are
  /// skipped, identically on every rank.
  std::function<void(const SweepGroup&, std::string_view reason)> on_skipped;
};

/// Untimed seconds (max across ranks) run at the first size of every group before timing it.
inline constexpr double kGroupWarmupSeconds = 0.02;
/// The same for the sweep's first group: right after launch the job is still settling (launcher
/// daemons finishing their start-up, first touches of every path), and 20 ms was not enough.
inline constexpr double kFirstGroupWarmupSeconds = 0.2;

struct SweepResult {
  std::vector<SweepRow> rows;
  std::uint64_t wrong = 0;  ///< wrong elements over every row (non-zero: a backend is broken)
};

/// Throws InvalidArgument naming the field, the value and the rule for: no op, size or dtype,
/// iterations < 1 or above max_iterations, warmup < 0, min_time_s < 0, a backend that is neither
/// "auto" nor in `usable`, a root outside [0, ranks) for a rooted op, a reduce operator other than
/// sum, min and max for a reduction. Called by run_sweep(); callers that must act before the
/// collective work (e.g. open an output file) can call it first.
void check_sweep_options(const SweepOptions& options, const std::vector<std::string>& usable,
                         int ranks);

/// Runs the sweep on `world` (collective: every rank calls it with the same options). Before the
/// first size of each (op, dtype, place, backend) group is timed, that size runs untimed for about
/// kGroupWarmupSeconds (kFirstGroupWarmupSeconds for the first group; nccl-tests warms up before
/// timing any size): first uses of a path
/// (connections, shared-memory channels set up after a number of messages, page faults) are paid
/// there instead of inflating the first point. Points where the requested backend cannot run are
/// skipped; send/recv is left out on 1 rank.
SweepResult run_sweep(Communicator& world, const SweepOptions& options,
                      const SweepCallbacks& callbacks = {});

}  // namespace mcr::bench
