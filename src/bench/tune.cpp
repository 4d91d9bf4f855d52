// Tuning: every backend timed interleaved per op, dtype class and size, then the table built.
#include "mcr/bench/tune.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "checks.hpp"
#include "mcr/bench/provenance.hpp"
#include "mcr/bench/table.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::vector<CallForm> parse_call_forms(std::string_view name) {
  if (name == "sync") return {CallForm::sync};
  if (name == "async") return {CallForm::async};
  if (name == "both") return {CallForm::sync, CallForm::async};
  throw InvalidArgument(fmt::format(
      "tune.forms '{}': must be sync, async or both (entries are kept per form)", name));
}

bool parse_tune_placement(std::string_view name) {
  if (name == "out" || name == "in") return name == "in";
  throw InvalidArgument(fmt::format(
      "tune.in_place '{}': must be out or in (a table holds one placement per op and size)", name));
}

void check_tune_options(const TuneOptions& o, const std::vector<std::string>& usable) {
  check_tune_flags(o);
  detail::require_usable("tune.backends", o.backends, usable, false);
}

void check_tune_flags(const TuneOptions& o) {
  detail::require_points(o.ops, o.sizes, o.dtypes);
  // A table keeps one entry per dtype class: two dtypes of a class would be timed apart and merged
  // into it by each backend's best time, so bf16 calls could go to the backend fp32 made fastest.
  for (std::size_t i = 0; i < o.dtypes.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (dtype_class(o.dtypes[i]) == dtype_class(o.dtypes[j])) {
        throw InvalidArgument(fmt::format(
            "options.dtypes {}, {}: both of class '{}', and a table keeps one entry per class; "
            "tune the one the job reduces in (at most one float and one int type)",
            to_string(o.dtypes[j]), to_string(o.dtypes[i]), dtype_class(o.dtypes[i])));
      }
    }
  }
  if (o.forms.empty())
    throw InvalidArgument("tune.forms: name at least one of sync, async (or both)");
  if (o.in_flight.empty())
    throw InvalidArgument("tune.in_flight: name at least one number of operations in flight");
  for (std::size_t i = 0; i < o.in_flight.size(); ++i) {
    const int n = o.in_flight[i];
    if (n < 1 || n > kTuneMaxIterations) {
      throw InvalidArgument(
          fmt::format("tune.in_flight {}: must be in [1, {}] operations", n, kTuneMaxIterations));
    }
    if (std::find(o.in_flight.begin(), o.in_flight.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        o.in_flight.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InvalidArgument(fmt::format("tune.in_flight {}: given twice", n));
    }
  }
  if (o.repetitions < 1)
    throw InvalidArgument(fmt::format("tune.repetitions {}: must be >= 1", o.repetitions));
  if (!(o.budget_ms > 0))
    throw InvalidArgument(fmt::format("tune.budget_ms {}: must be > 0 milliseconds", o.budget_ms));
  // Checked again by build_entries(); here so that a bad value fails before the measurements.
  if (!(o.hysteresis >= 0 && o.hysteresis < 1))
    throw InvalidArgument(fmt::format("tune.hysteresis {}: must be in [0, 1)", o.hysteresis));
}

TuneResult run_tune(Communicator& world, const TuneOptions& o, const TuneCallbacks& cb) {
  const auto start = std::chrono::steady_clock::now();
  check_tune_options(o, world.backends());
  const std::vector<std::string> backends = o.backends.empty() ? world.backends() : o.backends;
  InterleavedOptions io;
  io.repetitions = o.repetitions;
  io.repetition_budget_s = o.budget_ms * 1e-3;
  io.max_iterations = kTuneMaxIterations;

  TuneResult result;
  TuningTable& table = result.table;
  table.provenance = provenance(world, o.command);
  table.provenance["hysteresis"] = fmt::format("{}", o.hysteresis);
  // A world spanning several uniform hosts has the composed backend among its backends, so it is
  // timed like the others; the table says with which step libraries (docs/hier-backend.md).
  if (std::find(backends.begin(), backends.end(), "hier") != backends.end()) {
    const char* hier = std::getenv("MCR_HIER");
    table.provenance["hier"] = (hier != nullptr && *hier != '\0') ? hier : "intra=auto;inter=auto";
  }
  table.provenance["place"] = o.in_place ? "in (in-place form where the op has one)" : "out";
  const bool timed_async =
      std::find(o.forms.begin(), o.forms.end(), CallForm::async) != o.forms.end();
  std::string forms;
  for (CallForm f : o.forms)
    forms += fmt::format("{}{}", forms.empty() ? "" : " and ", to_string(f));
  std::vector<int> depths = o.in_flight;
  std::sort(depths.begin(), depths.end());
  std::string depth_list;
  for (std::size_t i = 0; i < depths.size(); ++i) {
    depth_list +=
        fmt::format("{}{}", i == 0 ? "" : (i + 1 == depths.size() ? " and " : ", "), depths[i]);
  }
  table.provenance["form"] =
      !timed_async ? forms
      : depths.size() == 1
          ? fmt::format("{} (async: i* calls, {} in flight at once, waited for inside the timing)",
                        forms, depth_list)
          : fmt::format(
                "{} (async: i* calls, {} in flight at once, each size timed at each, "
                "waited for inside the timing; a size goes to the backend with the "
                "smallest worst slowdown over them)",
                forms, depth_list);
  table.provenance["method"] = fmt::format(
      "median over {} interleaved repetitions of the max-across-ranks mean time per iteration; "
      "~{} ms per repetition",
      o.repetitions, o.budget_ms);
  // The step shapes of `hier` (docs/hier-backend.md): on a world of several hosts with the same
  // number of ranks on each, the per-host group and the same-local-index group across hosts are
  // measured too, each op that hier runs there, in the asynchronous form hier issues its steps
  // in, so that hier's per-step selection (the sub-communicators' own table lookup) has entries
  // for both shapes.
  const bool hier_steps_too = o.hier_steps && world.hosts() >= 2 && world.ranks_per_host() >= 2;
  struct Level {
    const char* name;
    bool within_host;
    std::vector<OpType> ops;
  };
  std::vector<Level> levels;
  if (hier_steps_too) {
    levels = {{"hier within hosts", true, {}}, {"hier between hosts", false, {}}};
    auto add = [](std::vector<OpType>& ops, OpType op) {
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    };
    for (OpType op : o.ops) {
      for (const HierStep& s : hier_steps(op, DType::f32, 0, world.ranks_per_host()))
        add(levels[s.within_host ? 0 : 1].ops, s.op);
    }
    if (o.subgroup_all_ops) {
      for (Level& l : levels) {
        for (OpType op : o.ops)
          add(l.ops, op);
      }
    }
  }

  // Points per size: the blocking form once, the asynchronous form once per number in flight.
  std::size_t timings_per_size = 0;
  for (CallForm f : o.forms)
    timings_per_size += f == CallForm::async ? depths.size() : 1;
  auto points_of = [&](const std::vector<OpType>& ops, int ranks, std::size_t form_count) {
    std::size_t n = 0;
    for (OpType op : ops) {
      if (skip_single_rank_p2p(ranks, op)) continue;
      // As the sweep below: each reduction's dtypes, each with its own distinct sizes (a size
      // rounds to whole elements, so narrower types may keep sizes that a wider one merges).
      for (DType dtype : is_reduction(op) ? o.dtypes : std::vector<DType>{o.dtypes.front()})
        n += distinct_sizes(op, o.sizes, dtype, ranks).size() * form_count;
    }
    return n;
  };
  std::size_t total = points_of(o.ops, world.size(), timings_per_size);
  for (const Level& l : levels)
    total += points_of(l.ops, l.within_host ? world.ranks_per_host() : world.hosts(), 1);
  std::size_t done = 0;

  std::vector<TuningSample> wrong;  // where a backend computed wrong values

  // Every op, dtype class, size and form of `ops` on `comm`, timed over `names`.
  auto sweep = [&](Communicator& comm, const std::vector<OpType>& ops,
                   const std::vector<CallForm>& call_forms, const std::vector<std::string>& names,
                   const std::vector<int>& in_flight, const std::string& group) {
    for (OpType op : ops) {
      if (skip_single_rank_p2p(comm.size(), op)) continue;
      // Data movement does not depend on the element type: one "any" entry. Reductions per class.
      const std::vector<DType> types =
          is_reduction(op) ? o.dtypes : std::vector<DType>{o.dtypes.front()};
      for (DType dtype : types) {
        const std::string klass = is_reduction(op) ? std::string(dtype_class(dtype)) : "any";
        for (std::size_t size : distinct_sizes(op, o.sizes, dtype, comm.size())) {
          // Both forms of one size one after the other, and the asynchronous one at each number
          // in flight: measured in the same minute, so that where they differ it is the form or
          // the number, not the load.
          for (CallForm form : call_forms) {
            const bool async = form == CallForm::async;
            const bool in_place = o.in_place && has_in_place(op);
            // One set of buffers for every number in flight: only the iteration count differs.
            Point point(comm, {op, dtype, size, in_place, 0, ReduceOp::sum, async, 1});
            for (int depth : async ? in_flight : std::vector<int>{0}) {
              io.min_iterations = async ? depth : 1;
              io.in_flight = async ? depth : 0;
              TunePoint p;
              p.op = op;
              p.dtype_class = klass;
              p.bytes = point.layout().bytes;
              p.form = form;
              p.in_flight = depth;
              p.group = group;
              p.timings = measure_interleaved(point, names, io);
              p.index = ++done;
              p.total = total;
              for (const auto& r : p.timings) {
                if (!r.supported) continue;
                // The group's shape: a table measured on 4x1 must not decide for a 2x2 job. An
                // uneven group (ranks_per_host 0) records its host count only.
                TuningSample sample{op,
                                    klass,
                                    comm.size(),
                                    p.bytes,
                                    r.backend,
                                    r.seconds * 1e6,
                                    comm.hosts(),
                                    comm.ranks_per_host(),
                                    std::string(to_string(form)),
                                    depth};
                if (r.wrong > 0) {  // a backend that computed wrong values must not win a range
                  result.wrong += r.wrong;
                  wrong.push_back(std::move(sample));
                  continue;
                }
                table.samples.push_back(std::move(sample));
              }
              p.elapsed_s = seconds_since(start);
              if (cb.on_point) cb.on_point(p);
            }
          }
          if (op == OpType::barrier) break;
        }
      }
    }
  };
  sweep(world, o.ops, o.forms, backends, depths, {});
  if (hier_steps_too) {
    // Every rank is in one group of each kind, and the groups of a kind run side by side, as
    // hier's steps do. One at a time in flight: hier issues a step when the one before is done.
    Communicator within = world.split(world.host_index(), world.local_rank());
    Communicator across = world.split(world.local_rank(), world.host_index());
    std::vector<std::string> flat;
    for (const auto& b : backends) {
      if (b != "hier") flat.push_back(b);
    }
    std::string note;
    for (const Level& l : levels) {
      Communicator& c = l.within_host ? within : across;
      std::string ops;
      for (OpType op : l.ops)
        ops += fmt::format("{}{}", ops.empty() ? "" : ", ", to_string(op));
      note += fmt::format("{}{}: {} ranks ({}x{}): {}", note.empty() ? "" : "; ", l.name, c.size(),
                          c.hosts(), c.ranks_per_host(), ops);
      sweep(c, l.ops, {CallForm::async}, flat, {1}, l.name);
    }
    table.provenance["hier_steps"] =
        note + (o.subgroup_all_ops
                    ? " (async form, one in flight; every tuned op: --subgroup-ops all)"
                    : " (async form, one in flight)");
  }
  table.samples = without_wrong_backends(std::move(table.samples), wrong);
  table.entries = build_entries(table.samples, o.hysteresis);
  result.wall_seconds = seconds_since(start);
  table.provenance["wall_seconds"] = fmt::format("{:.1f}", result.wall_seconds);
  return result;
}

}  // namespace mcr::bench
