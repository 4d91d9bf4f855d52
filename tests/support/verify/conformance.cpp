#include "conformance.hpp"

#include <algorithm>

namespace mcr::test {
namespace {

DType representative_dtype(OpType op) {
  return kAllDTypes[static_cast<std::size_t>(op) % std::size(kAllDTypes)];
}

bool contains(const std::vector<std::size_t>& v, std::size_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The reduce ops that need most care besides sum: avg divides (floating types only), bxor is the
// one bitwise op whose result depends on every operand bit (integer types only).
bool essential_reduce_op(ReduceOp r) {
  return r == ReduceOp::sum || r == ReduceOp::avg || r == ReduceOp::bxor;
}

}  // namespace

std::vector<ReduceOp> reduce_ops_for(OpType op, DType dtype) {
  if (!is_reduction(op)) return {ReduceOp::sum};
  std::vector<ReduceOp> ops;
  for (ReduceOp r : kAllReduceOps) {
    if (reduce_op_valid_for(r, dtype)) ops.push_back(r);
  }
  return ops;
}

std::vector<int> roots_for(OpType op, int size) {
  if (op == OpType::send) {
    if (size == 1) return {0};  // exchange with itself: asynchronous only
    std::vector<int> shifts{1};
    if (size > 2) shifts.push_back(size - 1);
    return shifts;
  }
  if (op != OpType::broadcast && op != OpType::reduce && op != OpType::gather &&
      op != OpType::scatter) {
    return {0};
  }
  // The last rank and rank 1 (offsets past the first block); at 2 ranks, where those are one, also
  // rank 0, the root most programs use (each backend's root-0 path is then run once per dtype).
  std::vector<int> roots{size - 1};
  if (1 % size != size - 1) roots.push_back(1 % size);
  if (size == 2) roots.push_back(0);
  return roots;
}

std::vector<bool> in_place_forms(OpType op) {
  std::vector<bool> forms;
  if (has_out_of_place_form(op)) forms.push_back(false);
  if (has_in_place_form(op) || !has_out_of_place_form(op)) forms.push_back(has_in_place_form(op));
  return forms;
}

std::vector<OpCase> conformance_cases(OpType op, int size, const MatrixOptions& options,
                                      int first_salt) {
  std::vector<OpCase> cases;
  int salt = first_salt;
  for (DType dtype : options.dtypes) {
    // A barrier moves no elements: one dtype is enough.
    if (op == OpType::barrier && dtype != options.dtypes.front()) break;
    for (ReduceOp reduce : reduce_ops_for(op, dtype)) {
      auto roots = roots_for(op, size);
      if (!options.both_roots) roots.resize(1);
      for (std::size_t ri = 0; ri < roots.size(); ++ri) {
        std::vector<std::size_t> counts;
        for (std::size_t count : options.counts) {
          if (!is_reduction(op) || essential_reduce_op(reduce) ||
              options.every_reduce_op_at.empty() || contains(options.every_reduce_op_at, count)) {
            counts.push_back(count);
          }
        }
        const bool large_here = options.large_count_everywhere ||
                                (ri == 0 && (is_reduction(op) ? reduce == ReduceOp::sum
                                                              : dtype == representative_dtype(op)));
        if (options.large_count != 0 && large_here) counts.push_back(options.large_count);
        for (std::size_t count : counts) {
          for (bool in_place : in_place_forms(op)) {
            for (bool async : {false, true}) {
              if (async && !options.sync_and_async) continue;
              // A synchronous exchange with itself would block (send before the matching recv).
              if (op == OpType::send && !async && roots[ri] % size == 0) continue;
              cases.push_back(
                  OpCase{op, dtype, reduce, count, in_place, async, roots[ri], {}, salt++});
            }
          }
        }
      }
    }
  }
  return cases;
}

std::vector<OpCase> conformance_cases(int size, const MatrixOptions& options) {
  std::vector<OpCase> all;
  for (OpType op : tested_ops()) {
    auto cases = conformance_cases(op, size, options, static_cast<int>(all.size()) + 1);
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

// No backend has a known gap at present (NCCL's send/recv with itself, the last one, is refused
// up front now, which the consumers count as unsupported).
std::string_view known_gap(const OpCase& /*c*/, int /*size*/) {
  return {};
}

}  // namespace mcr::test
