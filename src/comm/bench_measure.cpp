// Interleaved, repeated timing of several backends at one benchmark point (used by `mcr tune` and
// `mcr bench --compare-auto`).
#include <algorithm>
#include <cmath>

#include "mcr/bench.hpp"
#include "mcr/errors.hpp"

namespace mcr::bench {

std::vector<BackendTiming> measure_interleaved(Point& point,
                                               const std::vector<std::string>& backends,
                                               const InterleavedOptions& options) {
  Communicator comm = point.comm();
  const std::size_t nb = backends.size();
  std::vector<BackendTiming> out(nb);
  // Warmup doubles as the probe. An unsupported combination fails before anything is sent, and
  // identically on every rank, so skipping it keeps the ranks in step.
  std::vector<double> probe(nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    out[b].backend = backends[b];
    try {
      probe[b] = point.time(backends[b], std::max(options.warmup, 1));
    } catch (const UnsupportedError&) {
      out[b].supported = false;
    }
  }
  probe = reduce_across(comm, probe, TimeReduce::max);
  for (std::size_t b = 0; b < nb; ++b) {
    if (!out[b].supported) continue;
    const double per = std::max(probe[b], 1e-7);
    const auto want = static_cast<long long>(std::llround(options.repetition_budget_s / per));
    out[b].iterations =
        static_cast<int>(std::clamp<long long>(want, 1, std::max(options.max_iterations, 1)));
  }
  int reps = std::max(options.repetitions, 1);
  if (options.point_budget_s > 0) {
    // As many repetitions as the point's budget allows (from the probe, so equal on every rank).
    double per_round = 0;
    for (std::size_t b = 0; b < nb; ++b)
      per_round += out[b].supported ? out[b].iterations * std::max(probe[b], 1e-7) : 0.0;
    const auto fit = static_cast<long long>(options.point_budget_s / std::max(per_round, 1e-9));
    reps =
        static_cast<int>(std::clamp<long long>(fit, reps, std::max(reps, options.max_repetitions)));
  }
  std::vector<double> times(nb * static_cast<std::size_t>(reps), 0.0);
  // Every repetition visits the backends in a new order (successive permutations), so each backend
  // follows each other one about equally often.
  std::vector<std::size_t> order(nb);
  for (std::size_t b = 0; b < nb; ++b)
    order[b] = b;
  for (int r = 0; r < reps; ++r) {
    if (r > 0) std::next_permutation(order.begin(), order.end());
    for (const std::size_t b : order) {
      if (!out[b].supported) continue;
      comm.barrier();
      times[static_cast<std::size_t>(r) * nb + b] = point.time(backends[b], out[b].iterations);
    }
  }
  times = reduce_across(comm, times, TimeReduce::max);
  std::vector<double> wrong(nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    if (!out[b].supported) continue;
    std::vector<double> mine;
    for (int r = 0; r < reps; ++r)
      mine.push_back(times[static_cast<std::size_t>(r) * nb + b]);
    out[b].repetitions = mine;
    out[b].seconds = median(mine);
    wrong[b] = static_cast<double>(point.verify(backends[b]));
  }
  comm.all_reduce(wrong, ReduceOp::sum);
  for (std::size_t b = 0; b < nb; ++b)
    out[b].wrong = static_cast<std::uint64_t>(std::llround(wrong[b]));
  return out;
}

}  // namespace mcr::bench
