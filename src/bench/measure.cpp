// Timing across ranks: reductions of per-rank times, paired ratios, and the interleaved, repeated
// timing of several backends at one benchmark point (used by tuning and the auto comparison).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "mcr/bench/measure.hpp"
#include "mcr/errors.hpp"
#include "round_order.hpp"

namespace mcr::bench {
namespace {

// `n` rounded to whole batches of the async form's number in flight (down, but at least one): a
// last, shallower batch would mix another depth into the time that --in-flight 4,16 tells apart.
int whole_batches(int n, const InterleavedOptions& options) {
  const int depth = options.in_flight;
  return depth > 1 ? std::max(n / depth, 1) * depth : n;
}

// Time per iteration of one backend, max across ranks (so every rank derives the same iteration
// counts from it). After the warmup, one iteration is timed; while a timed run is shorter than a
// quarter of a repetition, it is repeated with more iterations. The warmup itself is not used: it
// carries first-call costs (connections, allocations) that would make a fast op look slow. A run of
// a few microseconds is dominated by how far apart the ranks leave the barrier and by the clock
// reads; an estimate taken from one would give that backend too few iterations per repetition, and
// with them a share of that fixed cost in every repetition which the other backends do not carry.
double probe_seconds(Point& point, const std::string& backend, const InterleavedOptions& options) {
  Communicator comm = point.comm();
  const int least = std::max(options.min_iterations, 1);
  // Whole batches, so that n can reach the cap and the loop below ends.
  const int cap = whole_batches(std::max(options.max_iterations, least), options);
  const double target = options.repetition_budget_s / 4;
  const int depth = options.in_flight;
  point.time(backend, std::max(options.warmup, least), depth);
  comm.barrier();
  int n = least;
  double per = reduce_across(comm, {point.time(backend, n, depth)}, TimeReduce::max)[0];
  while (per * n < target && n < cap) {
    const double grow = target / std::max(per * n, 1e-9);
    n = whole_batches(
        static_cast<int>(std::min<double>(cap, n * std::clamp(grow * 1.2, 2.0, 16.0))), options);
    comm.barrier();
    per = reduce_across(comm, {point.time(backend, n, depth)}, TimeReduce::max)[0];
  }
  return per;
}

}  // namespace

RatioEstimate paired_ratio(const std::vector<double>& numerators,
                           const std::vector<double>& denominators) {
  std::vector<double> r;
  const std::size_t n = std::min(numerators.size(), denominators.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (denominators[i] > 0) r.push_back(numerators[i] / denominators[i]);
  }
  RatioEstimate e;
  e.pairs = r.size();
  if (r.empty()) return e;
  e.median = median(r);
  std::sort(r.begin(), r.end());
  const double m = static_cast<double>(r.size());
  const double below = std::floor(m / 2 - 0.98 * std::sqrt(m)) - 1;  // 0-based rank
  const auto k = r.size() < 6 || below < 0 ? std::size_t{0} : static_cast<std::size_t>(below);
  e.low = r[k];
  e.high = r[r.size() - 1 - k];
  return e;
}

TimeReduce parse_time_reduce(std::string_view name) {
  if (name == "max") return TimeReduce::max;
  if (name == "min") return TimeReduce::min;
  if (name == "avg") return TimeReduce::avg;
  throw InvalidArgument(fmt::format("sweep.time '{}': must be one of max, min, avg", name));
}

ReduceOp parse_reduce(std::string_view name) {
  const auto op = parse_reduce_op(name);
  if (!op) {
    throw InvalidArgument(
        fmt::format("options.reduce '{}': unknown reduce operator (use sum, min, max)", name));
  }
  return *op;
}

std::vector<double> reduce_across(Communicator& comm, std::vector<double> values, TimeReduce how) {
  if (values.empty()) return values;
  const ReduceOp op = how == TimeReduce::max   ? ReduceOp::max
                      : how == TimeReduce::min ? ReduceOp::min
                                               : ReduceOp::sum;
  comm.all_reduce(values, op);
  if (how == TimeReduce::avg) {
    for (auto& v : values)
      v /= comm.size();
  }
  return values;
}

std::uint64_t sum_across(Communicator& comm, std::uint64_t value) {
  std::vector<std::int64_t> v{static_cast<std::int64_t>(value)};
  comm.all_reduce(v, ReduceOp::sum);
  return static_cast<std::uint64_t>(v[0]);
}

std::vector<BackendTiming> measure_interleaved(Point& point,
                                               const std::vector<std::string>& backends,
                                               const InterleavedOptions& options) {
  Communicator comm = point.comm();
  const std::size_t nb = backends.size();
  std::vector<BackendTiming> out(nb);
  // Warmup, then a probe of each backend's time per iteration. An unsupported combination fails
  // before anything is sent, and identically on every rank, so skipping it keeps the ranks in step.
  std::vector<double> probe(nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    out[b].backend = backends[b];
    try {
      probe[b] = probe_seconds(point, backends[b], options);
    } catch (const UnsupportedError&) {
      out[b].supported = false;
    }
  }
  // Backends of about the same speed (probe within kSameSpeed of the fastest) run the same number
  // of iterations per block: a block's fixed costs (the ranks leave the barrier at different
  // moments; small operations pipeline more over more iterations) are then spread alike, so two
  // paths to the same library (auto and the backend it picks) compare equal. A noisy probe of
  // one of them no longer decides the comparison.
  constexpr double kSameSpeed = 2.0;
  double fastest = 0;
  for (std::size_t b = 0; b < nb; ++b)
    if (out[b].supported && (fastest == 0 || probe[b] < fastest)) fastest = probe[b];
  for (std::size_t b = 0; b < nb; ++b) {
    if (!out[b].supported) continue;
    const double per = std::max(probe[b] <= fastest * kSameSpeed ? fastest : probe[b], 1e-9);
    const auto want = static_cast<long long>(std::llround(options.repetition_budget_s / per));
    const int least = std::max(options.min_iterations, 1);
    out[b].iterations = whole_batches(static_cast<int>(std::clamp<long long>(
                                          want, least, std::max(options.max_iterations, least))),
                                      options);
  }
  int reps = std::max(options.repetitions, 1);
  if (options.point_budget_s > 0) {
    // As many rounds as the point's budget allows (from the probe, so equal on every rank).
    double per_round = 0;
    for (std::size_t b = 0; b < nb; ++b)
      per_round += out[b].supported ? out[b].iterations * std::max(probe[b], 1e-7) : 0.0;
    const auto fit = static_cast<long long>(options.point_budget_s / std::max(per_round, 1e-9));
    reps =
        static_cast<int>(std::clamp<long long>(fit, reps, std::max(reps, options.max_repetitions)));
  }
  std::vector<std::size_t> active;
  for (std::size_t b = 0; b < nb; ++b)
    if (out[b].supported) active.push_back(b);
  // Every round visits the backends in an order drawn afresh (round_order.hpp).
  std::vector<std::size_t> order(active);
  detail::RoundOrder round_order;
  auto run_rounds = [&](int rounds) {
    std::vector<double> times(active.size() * static_cast<std::size_t>(rounds), 0.0);
    for (int r = 0; r < rounds; ++r) {
      round_order.next(order);
      for (const std::size_t b : order) {
        const auto slot =
            static_cast<std::size_t>(std::find(active.begin(), active.end(), b) - active.begin());
        comm.barrier();
        // One untimed iteration absorbs the skew with which the ranks left the barrier.
        point.time(backends[b], 1);
        times[static_cast<std::size_t>(r) * active.size() + slot] =
            point.time(backends[b], out[b].iterations, options.in_flight);
      }
    }
    times = reduce_across(comm, times, TimeReduce::max);
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t slot = 0; slot < active.size(); ++slot)
        out[active[slot]].repetitions.push_back(
            times[static_cast<std::size_t>(r) * active.size() + slot]);
    }
    for (const std::size_t b : active)
      out[b].seconds = median(out[b].repetitions);
  };
  run_rounds(reps);

  if (options.more_rounds && options.extra_budget_s > 0) {
    // Rounds of the backends the caller still needs, while it asks for them and the budget (from
    // the probe, so the same on every rank) lasts. The caller decides from max-across-ranks times,
    // which are identical on every rank, so every rank makes the same choice.
    double spent = 0;
    while (true) {
      std::vector<std::size_t> want = options.more_rounds(out);
      // Only ever fewer: a backend taken back after a pause would no longer run repetition r in
      // round r.
      std::erase_if(want, [&](std::size_t b) {
        return std::find(active.begin(), active.end(), b) == active.end();
      });
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      if (want.empty()) break;
      double per_round = 0;
      for (const std::size_t b : want)
        per_round += out[b].iterations * std::max(probe[b], 1e-7);
      const int batch = std::max(options.extra_batch, 1);
      if (spent + batch * per_round > options.extra_budget_s) break;
      spent += batch * per_round;
      if (want != active) {
        // Backends left out now have fewer repetitions; repetition r of the others stays round r.
        active = want;
        order = active;
      }
      run_rounds(batch);
    }
  }
  std::vector<double> wrong(nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    if (!out[b].supported) continue;
    wrong[b] = static_cast<double>(point.verify(backends[b]));
  }
  comm.all_reduce(wrong, ReduceOp::sum);
  for (std::size_t b = 0; b < nb; ++b)
    out[b].wrong = static_cast<std::uint64_t>(std::llround(wrong[b]));
  return out;
}

}  // namespace mcr::bench
