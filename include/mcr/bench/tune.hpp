// Tuning (`mcr tune`): every usable backend timed interleaved for each op, dtype class and size,
// then a tuning table built from the samples (winner per size with hysteresis, adjacent sizes
// merged, raw latencies and provenance kept). Progress is reported through a callback; writing
// the table is the caller's. See docs/bench.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/bench/measure.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/comm/communicator.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::bench {

/// Upper bound of iterations per repetition while tuning.
inline constexpr int kTuneMaxIterations = 1000;

/// Each field mirrors the `mcr tune` flag named in its comment. Errors name the field:
/// options.<field> for ops, sizes and dtypes (shared with the sweep), tune.<field> for the others.
struct TuneOptions {
  std::vector<OpType> ops = benchmark_ops();  ///< --op
  std::vector<std::size_t> sizes;             ///< nominal sizes in bytes (-b/-e/-f or --sizes)
  /// --dtype: reductions get one entry per dtype class; other ops one "any" entry (first dtype).
  std::vector<DType> dtypes{DType::f32};
  std::vector<std::string> backends;  ///< --backends: empty = every usable backend
  double hysteresis = 0.03;           ///< --hysteresis (see build_entries())
  int repetitions = 5;                ///< --reps: interleaved repetitions per point (median)
  double budget_ms = 10.0;            ///< --budget-ms: target time of one repetition
  /// --place in: time the in-place form of every op that has one (as a training step reduces its
  /// gradient buckets); out-of-place by default. A table holds one placement, named in its
  /// provenance.
  bool in_place = false;
  /// --form (--async = --form async): the call forms timed, each giving entries of its own form.
  /// The asynchronous form (the i* call, waited for inside the timing) is what callers that issue
  /// i* calls run (the PyTorch backend, a data-parallel step's gradient buckets): MPI's
  /// nonblocking collectives take other algorithms than its blocking ones and progress side by
  /// side, so the winner can differ from the blocking call's. At run time each call reads the
  /// entries of its own form (docs/tuning-format.md).
  std::vector<CallForm> forms{CallForm::sync};
  /// --in-flight: the async form issues at least this many operations before waiting for them
  /// (as a data-parallel step issues its buckets), so that the time per operation includes what
  /// a library gains or loses with several in flight. 1 = one at a time when they are slow.
  /// Several numbers ("4,16"): each size is timed at each, and a size goes to the backend whose
  /// worst slowdown over them is smallest (build_entries()): a call does not know how many
  /// operations its program keeps in flight, and libraries rank differently with few and many
  /// (docs/tuning-format.md).
  std::vector<int> in_flight{1};
  /// --no-hier-steps clears it: on a world of several hosts with the same number (>= 2) of ranks
  /// on each, also measure the groups that the composed backend `hier` runs its steps on (the
  /// ranks of one host; the ranks of one local index across hosts), the ops it runs there, in the
  /// asynchronous form, so that its per-step selection is measured (docs/hier-backend.md).
  bool hier_steps = true;
  /// --subgroup-ops all: those two groups are also measured with every op of `ops` (not only the
  /// ones hier runs there), for programs that form such groups themselves: DeepSpeed's expert
  /// groups within a host and its expert-data-parallel groups across hosts, tensor parallelism
  /// within a host. Same form as hier's steps (async, one in flight).
  bool subgroup_all_ops = false;
  std::string command;  ///< the provenance's "command" (see command_line())
};

/// One measured point, reported as it completes. Identical on every rank.
struct TunePoint {
  OpType op = OpType::all_reduce;
  std::string dtype_class;  ///< "float", "int" (reductions) or "any"
  std::size_t bytes = 0;
  CallForm form = CallForm::sync;
  int in_flight = 0;  ///< async form: operations in flight at once; 0 for the blocking form
  /// Empty for the world; "hier within hosts" or "hier between hosts" for a step group.
  std::string group;
  /// Every backend's timing; a supported one with wrong > 0 gave wrong values and is not used.
  std::vector<BackendTiming> timings;
  std::size_t index = 0;  ///< 1-based
  std::size_t total = 0;  ///< points in the whole run
  double elapsed_s = 0;   ///< since run_tune() started
};

struct TuneCallbacks {
  std::function<void(const TunePoint&)> on_point;  ///< called on every rank; may be empty
};

struct TuneResult {
  /// Entries, samples (the correct timings) and provenance (with hysteresis, method and wall
  /// time). Not yet validated or saved.
  TuningTable table;
  std::uint64_t wrong = 0;  ///< wrong elements over every backend and point
  double wall_seconds = 0;
};

/// "sync", "async" or "both" (sync first): the call forms a table is measured for. Throws
/// InvalidArgument naming tune.forms.
std::vector<CallForm> parse_call_forms(std::string_view name);
/// "out" (false) or "in" (true): the placement TuneOptions::in_place holds; a table keeps one
/// placement per op and size, so "both" is refused. Throws InvalidArgument naming tune.in_place.
bool parse_tune_placement(std::string_view name);

/// Throws InvalidArgument naming the field, the value and the rule for: no op, size or dtype,
/// repetitions < 1, budget_ms <= 0, hysteresis outside [0, 1), no in_flight or one outside [1,
/// kTuneMaxIterations] or given twice, no form, a backends name not in `usable`.
void check_tune_options(const TuneOptions& options, const std::vector<std::string>& usable);
/// The same checks but the backends', which need a communicator: `mcr tune` makes them before
/// init(), so that no rank waits on a flag that failed.
void check_tune_flags(const TuneOptions& options);

/// Measures and builds the table on `world` (collective: every rank calls it with the same
/// options). send/recv is left out on 1 rank.
TuneResult run_tune(Communicator& world, const TuneOptions& options,
                    const TuneCallbacks& callbacks = {});

}  // namespace mcr::bench
