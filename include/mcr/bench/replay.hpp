// Replay of a recorded communication trace (`mcr replay`): the trace (an MCR_LOG trace file or a
// JSON list of ops), its validation, and its timed, verified replay under several backend
// policies. See docs/bench.md, "mcr replay".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/comm/communicator.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::bench {

/// One operation of a trace, after repeats and steps are expanded.
struct TraceOp {
  OpType op = OpType::all_reduce;  ///< send stands for the ring send/recv pair, as in `mcr bench`
  DType dtype = DType::f32;
  std::size_t bytes = 0;  ///< the op's nccl-tests byte count (docs/tuning-format.md)
  int group = -1;         ///< index into Trace::groups; -1 = every rank of the job
  int root = 0;           ///< group rank of the root (broadcast, reduce, gather, scatter)
  bool async = false;
  bool wait = false;       ///< async: wait for every pending op after this one
  std::size_t source = 0;  ///< index of the op in the file (ops[i], or the trace event)
  /// An MCR_LOG trace's: the backend that ran the op, and its latency as the log's summary counts
  /// it (the slowest member's issue to completion, in microseconds). Empty and 0 in an op list.
  std::string backend;
  double latency_us = 0;
};

struct Trace {
  std::string path;
  std::string format;  ///< "mcr-trace" (the JSON op list) or "mcr-log" (an MCR_LOG trace)
  int world_size = 1;  ///< ranks the trace needs at least
  std::vector<std::vector<int>> groups;  ///< global ranks of each group, ascending
  std::vector<TraceOp> ops;              ///< in replay order
  std::size_t skipped_p2p = 0;  ///< MCR_LOG send/recv records left out (their peer is not logged)
  /// MCR_LOG all_to_all_v records of 0 bytes left out: issued without CallOptions::size_hint (as
  /// torch's all_to_all_single with splits is), so the log does not know their size.
  std::size_t skipped_unsized = 0;
  /// An MCR_LOG trace's host map: the host index of each global rank (hosts numbered in the order
  /// of their lowest rank), -1 for a rank it does not name (one that ran no collective). Every
  /// rank of `groups` has one. Empty when the trace records none (older traces, a rank's own log).
  std::vector<int> hosts;
};

/// Reads and validates a trace file of either format. Throws InvalidArgument naming the file, and
/// for a bad op its index, field, value and the rule it breaks.
Trace load_trace(const std::string& path);
/// The same from text already read (`path` only names it in messages).
Trace parse_trace(std::string_view text, const std::string& path);
/// Multiplies every op's bytes by `factor` (> 0), keeping at least one element per op, and a
/// multiple of 12 elements (at least 12) where the count was one, so it still divides on 1..4
/// ranks.
void scale_trace(Trace& trace, double factor);
/// Throws InvalidArgument when the trace needs more than `ranks` ranks.
void check_trace_fits(const Trace& trace, int ranks);

struct ReplayOptions {
  std::vector<std::string> policies;  ///< backend names, or "auto" for automatic selection
  int repetitions = 5;                ///< timed passes per policy (median reported)
  int warmup = 1;                     ///< untimed passes per policy first
  std::uint64_t seed = 1;
};

/// Per op type: count and bytes per pass, and the median over passes of the max-across-ranks
/// time spent in ops of that type (an async run's time is shared by its ops in proportion to
/// their bytes).
struct OpTypeTiming {
  OpType op = OpType::barrier;
  std::size_t count = 0;
  std::size_t bytes = 0;
  double seconds = 0;
};

struct PolicyResult {
  std::string policy;  ///< as requested: a backend name or "auto"
  double seconds = 0;  ///< median over timed passes of the max-across-ranks total
  double min_seconds = 0;
  std::vector<double> repetitions;  ///< each timed pass, max across ranks
  std::vector<OpTypeTiming> per_op;
  std::size_t fallbacks = 0;  ///< ops the backend cannot run, run under auto instead
  /// Buffers checked after the first timed pass (one per distinct op; the most on any rank).
  std::size_t checked_points = 0;
};

struct ReplayResult {
  int ranks = 0;
  std::vector<PolicyResult> policies;
  std::string best_single;  ///< fastest policy other than auto ("" when none was run)
  double best_single_s = 0;
  double auto_vs_best = 0;  ///< best single backend's time / auto's (0 without both)
};

/// Replays the trace once per policy untimed (warmup), then `repetitions` timed passes per policy
/// in rounds (one pass of each policy per round, in a new order each round). Inputs follow the
/// benchmark's verifiable pattern; the first timed pass of each policy is checked, and a wrong
/// value throws Error (on every rank) naming the policy and the op. Bad options throw
/// InvalidArgument naming the field (replay.policies, replay.repetitions, replay.warmup).
/// Collective over `world`.
ReplayResult replay(Communicator& world, const Trace& trace, const ReplayOptions& options);

}  // namespace mcr::bench
