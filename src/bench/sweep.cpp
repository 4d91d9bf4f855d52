// The nccl-tests-style sweep behind `mcr bench`.
#include "mcr/bench/sweep.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "checks.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

std::vector<bool> in_place_forms(Placement place) {
  switch (place) {
    case Placement::in:
      return {true};
    case Placement::both:
      return {false, true};
    default:
      return {false};
  }
}

// The group's warm-up pass: batches of growing size at its first point until they have run for
// `seconds` (max across ranks, so every rank stops after the same batch).
void warm_group(Communicator& world, Point& point, std::string_view backend, int first_batch,
                double seconds) {
  int batch = std::max(first_batch, 1);
  double spent = 0;
  for (int total = 0; total < 100000; total += batch) {
    spent += reduce_across(world, {point.time(backend, batch) * batch}, TimeReduce::max)[0];
    if (spent >= seconds) return;
    batch = std::min(batch * 4, 10000);
  }
}

// Timed iterations of a point: -n, or more to fill --min-time at the warmup's pace (max across
// ranks, so every rank runs the same count).
int iterations_for(Communicator& world, const SweepOptions& o, double warm_per_iteration) {
  if (o.min_time_s <= 0 || o.warmup == 0) return o.iterations;
  const double per = reduce_across(world, {warm_per_iteration}, TimeReduce::max)[0];
  const double want = std::ceil(o.min_time_s / std::max(per, 1e-9));
  return static_cast<int>(std::clamp<double>(want, o.iterations, o.max_iterations));
}

}  // namespace

Placement parse_placement(std::string_view name) {
  if (name == "out") return Placement::out;
  if (name == "in") return Placement::in;
  if (name == "both") return Placement::both;
  throw InvalidArgument(fmt::format("sweep.place '{}': must be out, in or both", name));
}

void check_sweep_options(const SweepOptions& o, const std::vector<std::string>& usable, int ranks) {
  detail::require_points(o.ops, o.sizes, o.dtypes);
  detail::check_point_arguments(o.ops, o.root, o.reduce, ranks);
  if (o.iterations < 1)
    throw InvalidArgument(
        fmt::format("sweep.iterations {}: at least one iteration is required", o.iterations));
  if (o.warmup < 0) throw InvalidArgument(fmt::format("sweep.warmup {}: must be >= 0", o.warmup));
  if (!(o.min_time_s >= 0))
    throw InvalidArgument(fmt::format("sweep.min_time_s {}: must be >= 0 seconds", o.min_time_s));
  if (o.iterations > o.max_iterations) {
    throw InvalidArgument(fmt::format("sweep.iterations {}: at most {} iterations per point",
                                      o.iterations, o.max_iterations));
  }
  if (o.backends.empty())
    throw InvalidArgument("sweep.backends: at least one backend (or auto) is required");
  detail::require_usable("sweep.backends", o.backends, usable, true);
}

SweepResult run_sweep(Communicator& world, const SweepOptions& o, const SweepCallbacks& cb) {
  check_sweep_options(o, world.backends(), world.size());
  SweepResult result;
  for (OpType op : o.ops) {
    if (skip_single_rank_p2p(world.size(), op)) continue;
    for (DType dtype : o.dtypes) {
      // An op without an in-place form (send/recv, barrier) runs out of place once, whatever
      // --place says, as mcr tune and mcr bench --compare do: it is not dropped from the sweep.
      const std::vector<bool> forms =
          has_in_place(op) ? in_place_forms(o.place) : std::vector<bool>{false};
      for (bool in_place : forms) {
        for (const auto& requested : o.backends) {
          const auto sizes = distinct_sizes(op, o.sizes, dtype, world.size());
          const SweepGroup group{op, dtype, in_place, requested,
                                 op == OpType::barrier ? 1 : sizes.size()};
          if (cb.on_group) cb.on_group(group);
          const std::string_view backend =
              requested == "auto" ? std::string_view() : std::string_view(requested);
          bool first = true;
          for (std::size_t size : sizes) {
            Point point(world,
                        {op, dtype, size, in_place, o.root, o.reduce, o.async, o.seed, o.device});
            const auto& l = point.layout();
            // An unsupported combination fails in the warmup, before anything is sent and
            // identically on every rank, so skipping the group keeps the ranks in step.
            double warm = 0;
            try {
              if (first) {
                warm_group(world, point, backend, o.warmup,
                           result.rows.empty() ? kFirstGroupWarmupSeconds : kGroupWarmupSeconds);
              }
              if (o.warmup > 0) warm = point.time(backend, o.warmup);
            } catch (const UnsupportedError& e) {
              if (cb.on_skipped) cb.on_skipped(group, e.what());
              break;
            }
            first = false;
            const int iterations = iterations_for(world, o, warm);
            world.barrier();
            double mine = 0;
            try {
              mine = point.time(backend, iterations);
            } catch (const UnsupportedError& e) {
              // Without warmup (-w 0) the timed run is a size's first call: a size past the
              // backend's limit fails here, before anything is sent and on every rank alike.
              if (cb.on_skipped) cb.on_skipped(group, e.what());
              break;
            }
            const double t = reduce_across(world, {mine}, o.time)[0];
            SweepRow row;
            row.op = op;
            row.dtype = dtype;
            row.bytes = l.bytes;
            row.count = l.chunk;
            row.root = has_root(op) ? o.root : -1;
            row.in_place = in_place;
            row.async = o.async;
            row.requested = requested;
            // The form the sweep timed: a table tuned per form may send the i* call elsewhere.
            row.backend =
                requested == "auto"
                    ? world
                          .explain(op, dtype, l.bytes, is_reduction(op) ? o.reduce : ReduceOp::sum,
                                   o.device, o.async ? CallForm::async : CallForm::sync)
                          .backend
                    : requested;
            row.iterations = iterations;
            row.time_us = t * 1e6;
            row.algbw_gbps = algbw_gbps(l.bytes, t);
            row.busbw_gbps = busbw_gbps(op, l.bytes, t, world.size());
            row.wrong = sum_across(world, point.verify(backend));
            result.wrong += row.wrong;
            result.rows.push_back(std::move(row));
            if (cb.on_row) cb.on_row(result.rows.back());
            if (op == OpType::barrier) break;  // no size
          }
        }
      }
    }
  }
  return result;
}

}  // namespace mcr::bench
