// The conformance case list: op x dtype x reduce op x count x placement x root (x sync/async),
// identical on every rank and independent of the backend. The multi-rank suite runs it through
// every backend usable in the process; the Gloo thread-rank tests and the NCCL device tests run
// the same list through a backend driven directly (backend_args.hpp). docs/testing.md says which
// consumer runs which slice of it, and why.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "prepared_case.hpp"

namespace mcr::test {

struct MatrixOptions {
  std::vector<std::size_t> counts{0, 1, 7, 1000};
  /// Counts at which every reduce op valid for the dtype runs; at the other counts only sum and
  /// the op that needs most care (avg for floating types, bxor for integers). Empty: every count.
  std::vector<std::size_t> every_reduce_op_at;
  /// An extra, large count: reductions run it for every dtype with sum, the other operations for
  /// one representative dtype each (rotating, so that every dtype appears). 0: none.
  std::size_t large_count = 0;
  /// Runs the large count for every combination instead (MCR_TEST_FULL_MATRIX).
  bool large_count_everywhere = false;
  std::vector<DType> dtypes{std::begin(kAllDTypes), std::end(kAllDTypes)};
  /// Every root (size - 1 and 1 % size, and 0 at 2 ranks; exchange shifts 1 and size - 1), else
  /// the first only.
  bool both_roots = true;
  /// Sync and async variants of each case; false: sync only (for drivers that pick the mode).
  bool sync_and_async = true;
};

/// Reduce ops the matrix runs for `op` on `dtype` (every valid one; {sum} for non-reductions).
std::vector<ReduceOp> reduce_ops_for(OpType op, DType dtype);
/// Roots of rooted collectives, shifts of the send/recv exchange, {0} for the other ops.
std::vector<int> roots_for(OpType op, int size);
/// The placements `op` has: out-of-place and/or in place.
std::vector<bool> in_place_forms(OpType op);

/// The cases of `op` on a group of `size` ranks, salts numbered from `first_salt`. The backend is
/// left empty: the consumer sets it.
std::vector<OpCase> conformance_cases(OpType op, int size, const MatrixOptions& options,
                                      int first_salt = 1);
/// The cases of every operation of tested_ops() (barrier included), in that order.
std::vector<OpCase> conformance_cases(int size, const MatrixOptions& options);

/// Why `c` on a group of `size` ranks is a known gap of its backend, empty when it is not one. A
/// consumer reports a failing known gap as such instead of failing, and a passing one silently;
/// each entry names the defect, to be removed with its fix (docs/testing.md).
std::string_view known_gap(const OpCase& c, int size);

}  // namespace mcr::test
