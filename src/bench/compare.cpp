// Automatic selection against every single backend, interleaved at each point.
#include "mcr/bench/compare.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "checks.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {

std::string ComparePoint::best_backend() const {
  return best == 0 || best >= timings.size() ? std::string("-") : timings[best].backend;
}

double ComparePoint::best_seconds() const noexcept {
  return best == 0 || best >= timings.size() ? 0.0 : timings[best].seconds;
}

std::size_t best_single(const std::vector<BackendTiming>& res) {
  // A backend whose results were wrong is not a baseline: fast because broken, it would make
  // automatic selection look slow.
  std::size_t best = 0;
  for (std::size_t v = 1; v < res.size(); ++v) {
    if (res[v].supported && res[v].wrong == 0 && (best == 0 || res[v].seconds < res[best].seconds))
      best = v;
  }
  return best;
}

InterleavedOptions compare_interleaved_options(const CompareOptions& o) {
  InterleavedOptions io;
  io.repetitions = o.repetitions;
  io.warmup = std::max(o.warmup, 1);
  io.repetition_budget_s = kCompareRepetitionBudgetS;
  io.max_iterations = kCompareMaxIterations;
  io.point_budget_s = kComparePointBudgetS;
  io.max_repetitions = kCompareMaxRepetitions;
  // Then only auto and the contenders for best, until the ratio is known to within
  // `precision` (95% confidence) or the extra budget is spent.
  io.extra_budget_s = o.extra_budget_s;
  io.extra_batch = kCompareExtraBatch;
  io.more_rounds = [precision = o.precision](const std::vector<BackendTiming>& res) {
    const std::size_t best = best_single(res);
    if (best == 0) return std::vector<std::size_t>{};
    // A backend left out of the extra rounds (its median frozen) that the measured ones' rising
    // medians made best again: no further round pairs it with auto, so none can narrow the ratio.
    if (res[best].repetitions.size() < res[0].repetitions.size()) return std::vector<std::size_t>{};
    const auto ratio = paired_ratio(res[best].repetitions, res[0].repetitions);
    if (ratio.relative_half_width() <= precision) return std::vector<std::size_t>{};
    std::vector<std::size_t> keep{0};
    for (std::size_t v = 1; v < res.size(); ++v) {  // near enough that it might still be best
      if (res[v].supported && res[v].seconds <= res[best].seconds * kCompareContenderMargin)
        keep.push_back(v);
    }
    return keep;
  };
  return io;
}

void check_compare_options(const CompareOptions& o, int ranks) {
  detail::require_points(o.ops, o.sizes, o.dtypes);
  detail::check_point_arguments(o.ops, o.root, o.reduce, ranks);
  if (o.repetitions < 1)
    throw InvalidArgument(
        fmt::format("compare.repetitions {}: at least one repetition is required", o.repetitions));
  // -w -5 read as 1 (at least one warm-up call is run), where a plain sweep refuses it.
  if (o.warmup < 0)
    throw InvalidArgument(fmt::format("compare.warmup {}: must be >= 0 calls", o.warmup));
  // A NaN target was met by no point, and said so of every one.
  if (!(o.min_ratio > 0) || !std::isfinite(o.min_ratio))
    throw InvalidArgument(
        fmt::format("compare.min_ratio {}: must be a finite number > 0", o.min_ratio));
  if (!(o.precision >= 0))
    throw InvalidArgument(fmt::format("compare.precision {}: must be >= 0", o.precision));
  if (!(o.extra_budget_s >= 0))
    throw InvalidArgument(
        fmt::format("compare.extra_budget_s {}: must be >= 0 seconds", o.extra_budget_s));
}

CompareResult run_compare(Communicator& world, const CompareOptions& o,
                          const CompareCallbacks& cb) {
  check_compare_options(o, world.size());
  CompareResult result;
  result.backends = world.backends();
  std::vector<std::string> variants{""};  // "" = automatic selection
  variants.insert(variants.end(), result.backends.begin(), result.backends.end());
  const InterleavedOptions io = compare_interleaved_options(o);
  for (OpType op : o.ops) {
    if (skip_single_rank_p2p(world.size(), op)) continue;
    for (DType dtype : o.dtypes) {
      if (cb.on_group) cb.on_group(op, dtype);
      for (std::size_t size : distinct_sizes(op, o.sizes, dtype, world.size())) {
        Point point(world, {op, dtype, size, o.in_place && has_in_place(op), o.root, o.reduce,
                            o.async, o.seed, o.device});
        ComparePoint p;
        p.op = op;
        p.dtype = dtype;
        p.timings = measure_interleaved(point, variants, io);
        p.bytes = point.layout().bytes;
        p.auto_backend =
            world
                .explain(op, dtype, p.bytes, is_reduction(op) ? o.reduce : ReduceOp::sum, o.device,
                         o.async ? CallForm::async : CallForm::sync)
                .backend;
        p.best = best_single(p.timings);
        for (const auto& r : p.timings)
          result.wrong += r.wrong;
        // Paired per round: the two runs of a round are adjacent in time, so load that drifts
        // between rounds cancels out of their ratio.
        if (p.best != 0)
          p.ratio = paired_ratio(p.timings[p.best].repetitions, p.timings[0].repetitions);
        p.met = p.ratio.median >= o.min_ratio;
        if (p.met) ++result.met;
        result.points.push_back(std::move(p));
        if (cb.on_point) cb.on_point(result.points.back());
      }
    }
  }
  return result;
}

}  // namespace mcr::bench
