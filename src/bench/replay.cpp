// The replay of a trace under several backend policies: one verifiable Point per distinct op (per
// concurrently pending async op), passes timed as the max across ranks, policies interleaved per
// round, and the first timed pass of each policy checked.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "checks.hpp"
#include "mcr/bench/bandwidth.hpp"
#include "mcr/bench/measure.hpp"
#include "mcr/bench/point.hpp"
#include "mcr/bench/replay.hpp"
#include "mcr/errors.hpp"
#include "round_order.hpp"

namespace mcr::bench {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string describe(const Trace& trace, const TraceOp& op) {
  std::string group = "world";
  if (op.group >= 0)
    group = fmt::format("[{}]", fmt::join(trace.groups[static_cast<std::size_t>(op.group)], ","));
  return fmt::format("{} {} {} B{}, group {}", to_string(op.op), to_string(op.dtype), op.bytes,
                     op.async ? " async" : "", group);
}

class Replayer {
 public:
  Replayer(Communicator& world, const Trace& trace, std::uint64_t seed)
      : world_(world), trace_(trace) {
    // Sub-communicators: created by every rank in the same order (new_group is collective).
    std::vector<int> all(static_cast<std::size_t>(world.size()));
    for (int q = 0; q < world.size(); ++q)
      all[static_cast<std::size_t>(q)] = q;
    for (const auto& g : trace.groups)
      comms_.push_back(g == all ? world : world.new_group(g));
    // One Point per distinct (group, op, dtype, bytes, root, async), and per position among the
    // identical ones pending at once: concurrent ops must not share an output buffer.
    using Key = std::tuple<int, OpType, DType, std::size_t, int, bool, int>;
    std::map<Key, std::size_t> index;
    std::map<Key, int> in_run;  // identical ops issued since the last wait
    // The data's seed is the trace index of the first op of its kind, which every member of the
    // op agrees on; the position among pending ones does not take part, as it is this rank's
    // alone (a sync op of a sub-group ends the run on its members only).
    std::map<Key, std::uint64_t> first_of_kind;
    points_of_.assign(trace.ops.size(), kNone);
    for (std::size_t i = 0; i < trace.ops.size(); ++i) {
      const TraceOp& op = trace.ops[i];
      Communicator c = comm(op);
      if (!c.valid()) {  // not this rank's op; in an MCR_LOG trace its wait point ends the run
        if (ends_run_everywhere(op)) in_run.clear();
        continue;
      }
      if (!op.async) in_run.clear();
      Key key{op.group, op.op, op.dtype, op.bytes, op.root, op.async, 0};
      const std::uint64_t kind_seed = seed + first_of_kind.try_emplace(key, i).first->second;
      if (op.async) std::get<6>(key) = in_run[key]++;
      auto [it, fresh] = index.try_emplace(key, points_.size());
      if (fresh) {
        PointConfig pc;
        pc.op = op.op;
        pc.dtype = op.dtype;
        pc.nominal_bytes = op.bytes;
        pc.root = op.root;
        pc.async = op.async;
        pc.seed = kind_seed;  // distinct data per kind of op: a crossed buffer gives wrong values
        points_.push_back(std::make_unique<Point>(c, pc));
        last_use_.push_back(i);
      }
      points_of_[i] = it->second;
      last_use_[it->second] = i;
      if (op.async && op.wait) in_run.clear();
    }
  }

  std::size_t points() const noexcept { return points_.size(); }

  // An MCR_LOG trace's wait points are placed where the whole job's run stopped overlapping
  // (replay_trace.cpp), so they end the run on ranks outside the op too; an op list's wait point
  // is its members' alone, as written.
  bool ends_run_everywhere(const TraceOp& op) const noexcept {
    return op.async && op.wait && trace_.format == "mcr-log";
  }

  /// One pass under `backend` ("" = auto): this rank's seconds in total and per op type (slots
  /// 1..kNumOpTypes). Ops the backend cannot run are marked in `fallback` and run under auto.
  std::vector<double> pass(std::string_view backend, std::vector<char>& fallback) {
    std::vector<double> t(1 + kNumOpTypes, 0.0);
    std::vector<std::size_t> run;  // async ops issued since the last wait
    Clock::time_point run_t0;
    auto flush = [&] {
      if (run.empty()) return;
      for (auto& w : pending_)
        w.wait();
      pending_.clear();
      const double elapsed = since(run_t0);
      std::size_t bytes = 0;
      for (const std::size_t i : run)
        bytes += trace_.ops[i].bytes;
      for (const std::size_t i : run) {
        const double share = bytes > 0 ? static_cast<double>(trace_.ops[i].bytes) / bytes
                                       : 1.0 / static_cast<double>(run.size());
        t[1 + static_cast<std::size_t>(trace_.ops[i].op)] += elapsed * share;
      }
      run.clear();
    };
    world_.barrier();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < trace_.ops.size(); ++i) {
      const TraceOp& op = trace_.ops[i];
      if (points_of_[i] == kNone) {  // not this rank's op; in an MCR_LOG trace its wait point
        if (ends_run_everywhere(op)) flush();  // ends the run
        continue;
      }
      Point& p = *points_[points_of_[i]];
      if (!op.async) flush();
      const auto op_t0 = Clock::now();
      if (op.async && run.empty()) run_t0 = op_t0;
      issue(p, i, backend, fallback);
      if (op.async) {
        run.push_back(i);
        if (op.wait) flush();
      } else {
        t[1 + static_cast<std::size_t>(op.op)] += since(op_t0);
      }
    }
    flush();
    t[0] = since(t0);
    return t;
  }

  void reset_all() {
    for (auto& p : points_)
      p->reset();
  }

  /// Wrong values per op of the trace (at the last op that used each buffer), summed over ranks.
  std::vector<double> wrong_per_op() {
    std::vector<double> wrong(trace_.ops.size(), 0.0);
    for (std::size_t k = 0; k < points_.size(); ++k)
      wrong[last_use_[k]] += static_cast<double>(points_[k]->wrong());
    world_.all_reduce(wrong, ReduceOp::sum);
    return wrong;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  Communicator comm(const TraceOp& op) const {
    return op.group < 0 ? world_ : comms_[static_cast<std::size_t>(op.group)];
  }

  // The backend's refusal comes before anything is sent and alike on every member (the same
  // backend, op and dtype), so running that op under auto instead keeps the ranks in step.
  void issue(Point& p, std::size_t i, std::string_view backend, std::vector<char>& fallback) {
    if (backend.empty() || fallback[i] != 0) {
      p.issue("", pending_);
      return;
    }
    try {
      p.issue(backend, pending_);
    } catch (const UnsupportedError&) {
      fallback[i] = 1;
      p.issue("", pending_);
    }
  }

  Communicator& world_;
  const Trace& trace_;
  std::vector<Communicator> comms_;
  std::vector<std::unique_ptr<Point>> points_;
  std::vector<std::size_t> points_of_;  ///< per op: its Point, or kNone on a non-member rank
  std::vector<std::size_t> last_use_;   ///< per Point: the last op that ran on it
  std::vector<Work> pending_;
};

}  // namespace

ReplayResult replay(Communicator& world, const Trace& trace, const ReplayOptions& options) {
  check_trace_fits(trace, world.size());
  if (options.policies.empty())
    throw InvalidArgument("replay.policies: at least one policy is required");
  detail::require_usable("replay.policies", options.policies, world.backends(), true);
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    const auto& name = options.policies[p];
    if (std::find(options.policies.begin(),
                  options.policies.begin() + static_cast<std::ptrdiff_t>(p),
                  name) != options.policies.begin() + static_cast<std::ptrdiff_t>(p))
      throw InvalidArgument(fmt::format("replay.policies '{}': listed twice", name));
  }
  if (options.repetitions < 1)
    throw InvalidArgument(fmt::format("replay.repetitions {}: must be >= 1", options.repetitions));
  if (options.warmup < 0)
    throw InvalidArgument(fmt::format("replay.warmup {}: must be >= 0", options.warmup));
  Replayer replayer(world, trace, options.seed);
  const std::size_t np = options.policies.size();
  const std::size_t nops = trace.ops.size();
  auto backend_of = [&](std::size_t p) -> std::string_view {
    return options.policies[p] == "auto" ? std::string_view() : options.policies[p];
  };
  std::vector<std::vector<char>> fallback(np, std::vector<char>(nops, 0));
  for (std::size_t p = 0; p < np; ++p) {
    for (int w = 0; w < options.warmup; ++w)
      replayer.pass(backend_of(p), fallback[p]);
  }
  // Rounds: one timed pass of each policy, in an order drawn afresh each round (round_order.hpp,
  // as measure_interleaved; successive permutations alternated two policies AB BA AB ...).
  const auto reps = static_cast<std::size_t>(options.repetitions);
  const std::size_t width = 1 + kNumOpTypes;
  std::vector<double> local(np * reps * width, 0.0);
  std::vector<char> checked(np, 0);
  std::vector<std::size_t> order(np);
  for (std::size_t p = 0; p < np; ++p)
    order[p] = p;
  detail::RoundOrder round_order;
  for (std::size_t r = 0; r < reps; ++r) {
    round_order.next(order);
    for (const std::size_t p : order) {
      const bool check = checked[p] == 0;
      if (check) replayer.reset_all();  // untimed: fresh inputs, sentinel outputs
      const auto t = replayer.pass(backend_of(p), fallback[p]);
      std::copy(t.begin(), t.end(),
                local.begin() + static_cast<std::ptrdiff_t>((p * reps + r) * width));
      if (!check) continue;
      checked[p] = 1;
      const auto wrong = replayer.wrong_per_op();
      for (std::size_t i = 0; i < nops; ++i) {
        if (wrong[i] > 0) {
          throw Error(fmt::format(
              "{}: policy '{}': op {} of the replay ({}, from the trace's op {}): {} wrong values "
              "over all ranks",
              trace.path, options.policies[p], i, describe(trace, trace.ops[i]),
              trace.ops[i].source, static_cast<std::uint64_t>(wrong[i])));
        }
      }
    }
  }
  const auto times = reduce_across(world, local, TimeReduce::max);
  // Fallbacks: each rank knows those of its own ops; an op counts once.
  std::vector<double> fell(np * nops, 0.0);
  for (std::size_t p = 0; p < np; ++p) {
    for (std::size_t i = 0; i < nops; ++i)
      fell[p * nops + i] = fallback[p][i];
  }
  fell = reduce_across(world, fell, TimeReduce::max);
  const double checked_points =
      reduce_across(world, {static_cast<double>(replayer.points())}, TimeReduce::max)[0];

  ReplayResult out;
  out.ranks = world.size();
  for (std::size_t p = 0; p < np; ++p) {
    PolicyResult pr;
    pr.policy = options.policies[p];
    std::vector<std::vector<double>> per_type(kNumOpTypes);
    for (std::size_t r = 0; r < reps; ++r) {
      const double* row = times.data() + (p * reps + r) * width;
      pr.repetitions.push_back(row[0]);
      for (std::size_t k = 0; k < kNumOpTypes; ++k)
        per_type[k].push_back(row[1 + k]);
    }
    pr.seconds = median(pr.repetitions);
    pr.min_seconds = *std::min_element(pr.repetitions.begin(), pr.repetitions.end());
    for (OpType type : kAllOpTypes) {
      OpTypeTiming timing;
      timing.op = type;
      for (const auto& op : trace.ops) {
        if (op.op != type) continue;
        ++timing.count;
        timing.bytes += op.bytes;
      }
      if (timing.count == 0) continue;
      timing.seconds = median(per_type[static_cast<std::size_t>(type)]);
      pr.per_op.push_back(timing);
    }
    for (std::size_t i = 0; i < nops; ++i)
      pr.fallbacks += fell[p * nops + i] > 0 ? 1 : 0;
    pr.checked_points = static_cast<std::size_t>(checked_points);
    out.policies.push_back(std::move(pr));
  }
  const PolicyResult* best = nullptr;
  const PolicyResult* automatic = nullptr;
  for (const auto& pr : out.policies) {
    if (pr.policy == "auto") {
      automatic = &pr;
    } else if (best == nullptr || pr.seconds < best->seconds) {
      best = &pr;
    }
  }
  if (best != nullptr) {
    out.best_single = best->policy;
    out.best_single_s = best->seconds;
  }
  if (best != nullptr && automatic != nullptr && automatic->seconds > 0)
    out.auto_vs_best = best->seconds / automatic->seconds;
  return out;
}

}  // namespace mcr::bench
