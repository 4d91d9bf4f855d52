// Refining a tuning table with the latencies a program's own run recorded (`mcr tune --refine`).
// `mcr tune` times each backend with the ranks otherwise idle; inside a training step the same
// operation can rank differently (on hosts whose cores the ranks share, MPI progresses and reduces
// on the calling thread, which the step needs too: docs/deepspeed.md). Where MCR_LOG traces of the
// program show several backends running one operation at one size, their median latencies there
// replace the tuned figures at that size and the entry is rebuilt as `mcr tune` builds it. See
// docs/tuning-format.md, "Refining a table with a run's latencies".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "mcr/bench/replay.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/comm/types.hpp"

namespace mcr::bench {

struct RefineOptions {
  /// Margin another backend must beat the neighbouring smaller size's winner by (as in
  /// build_entries()); negative: the table's own (provenance "hysteresis"), else 0.03.
  double hysteresis = -1;
  /// Operations a backend must have run at a size for its median to count.
  std::size_t min_ops = 10;
  std::string command;  ///< recorded in the refined table's provenance
};

/// One operation and size that the traces show, with what the refinement made of it.
struct RefinedPoint {
  OpType op = OpType::all_reduce;
  std::string dtype_class;  ///< "float"/"int" for reductions, else "any"
  int group_size = 0;
  std::string form;  ///< "sync" or "async"
  std::size_t bytes = 0;
  struct Observed {
    std::string backend;
    std::size_t ops = 0;
    double p50_us = 0;  ///< median latency (the slowest member's, per operation)
  };
  std::vector<Observed> observed;  ///< per backend, fastest median first
  std::string before;              ///< the table's backend at this size ("" where none)
  std::string after;               ///< after refining ("" where not refined)
  std::string note;                ///< why it was not refined (empty when it was)
  /// The group's hosts x ranks per host by the trace's host map (a whole job's group in a trace
  /// without one: the table's world shape); 0 x 0 where not known.
  HostShape shape;
};

/// A tuned size that the traces did not show whose backend changed when its entry was rebuilt:
/// the walk's hysteresis compares each size with its smaller neighbour's winner, so a refined
/// size's new winner can carry over a near tie next to it (or let one go).
struct ShiftedSize {
  OpType op = OpType::all_reduce;
  std::string dtype_class;
  int group_size = 0;
  std::string topology;  ///< the entry's (TuningEntry::topology())
  std::string form;      ///< the entry's
  std::size_t bytes = 0;
  std::string before;
  std::string after;
};

struct RefineResult {
  TuningTable table;                 ///< entries rebuilt where refined; run samples appended
  std::vector<RefinedPoint> points;  ///< sorted by op, group size, hosts, form, bytes
  std::size_t entries_refined = 0;
  std::vector<ShiftedSize> shifted;  ///< in entry order, then by size
};

/// Refines `table` with the operations of `traces` (MCR_LOG traces: each op's backend and
/// latency). For every (op, dtype class, group size, form, size) that at least two backends ran
/// `min_ops` times or more, the table's own backend among them, on a group spanning the traced
/// job (whose size must be the table's: the world's topology comes from its provenance), it finds
/// the entry such a call reads and rebuilds it from its samples with the run's medians in place of
/// every other figure at that size (build_entries(); at the other sizes the tuned samples decide
/// as before, and `shifted` names each of them whose backend the rebuilt walk changed). An entry
/// whose ranges are not what its own samples give is left as it is. Groups smaller than the job
/// are placed by the trace's host map, and not refined in a trace without one. The points say why
/// each was or was not refined. Refining a refined table replaces its earlier run
/// medians at the sizes the new traces show. Throws InvalidArgument when no trace holds a logged
/// operation, or for bad options (refine.hysteresis >= 1, refine.min_ops 0).
RefineResult refine_table(const TuningTable& table, const std::vector<Trace>& traces,
                          const RefineOptions& options);

}  // namespace mcr::bench
