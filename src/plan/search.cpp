#include "mcr/plan/search.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "mcr/codesign/calculators.hpp"
#include "mcr/errors.hpp"

namespace mcr::plan {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

template <class T>
std::vector<T> or_default(const std::vector<T>& given, std::vector<T> fallback) {
  return given.empty() ? std::move(fallback) : given;
}

void keep_top(std::vector<PlanResult>& v, int top) {
  std::sort(v.begin(), v.end(),
            [](const PlanResult& a, const PlanResult& b) { return a.step_time_s < b.step_time_s; });
  if (top > 0 && static_cast<int>(v.size()) > top) v.resize(static_cast<std::size_t>(top));
}

}  // namespace

SearchResult search_layouts(const codesign::ModelShape& model, const codesign::DeviceSpec& device,
                            const CommModel& comm, const SearchSpace& space, int top,
                            const PlanOptions& options) {
  const SystemSpec& sys = comm.system();
  const int gpus = space.gpus > 0 ? space.gpus : sys.total_gpus();
  if (gpus > sys.total_gpus()) {
    throw InvalidArgument(
        fmt::format("--gpus {} exceeds system '{}' ({} GPUs)", gpus, sys.name, sys.total_gpus()));
  }
  if (space.global_batch < 1) {
    throw InvalidArgument("--search needs --global-batch: the number of sequences per step");
  }
  const auto all = divisors(gpus);
  const auto tps = or_default(space.tp, all);
  const auto pps = or_default(space.pp, all);
  const auto mbs = or_default(space.micro_batch, std::vector<std::int64_t>{1, 2, 4, 8, 16});
  const auto ils = or_default(space.interleave, std::vector<int>{1, 2, 3, 4, 6, 8});
  const auto rcs =
      or_default(space.recompute,
                 std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full});
  const auto zs = or_default(space.zero, std::vector<int>{0, 1});

  SearchResult out;
  std::vector<PlanResult> fits, too_big;
  for (int tp : tps) {
    if (gpus % tp != 0) continue;
    for (int pp : pps) {
      if ((gpus / tp) % pp != 0) continue;
      const int dp = gpus / tp / pp;
      const auto sps = or_default(space.sequence_parallel, tp > 1 ? std::vector<bool>{false, true}
                                                                  : std::vector<bool>{false});
      for (std::int64_t mb : mbs)
        for (int il : ils)
          for (Recompute rc : rcs)
            for (bool sp : sps)
              for (int z : zs) {
                Layout l;
                l.gpus = gpus;
                l.tp = tp;
                l.pp = pp;
                l.dp = dp;
                l.micro_batch = mb;
                l.global_batch = space.global_batch;
                l.interleave = il;
                l.recompute = rc;
                l.sequence_parallel = sp;
                l.zero = z;
                l.allow_tp_across_nodes = space.allow_tp_across_nodes;
                l.dp_overlap = space.dp_overlap;
                if (!layout_error(l, model, sys).empty()) {
                  ++out.rejected;
                  continue;
                }
                ++out.evaluated;
                auto r = plan_step(model, device, comm, l, options);
                if (r.memory.fits) {
                  fits.push_back(std::move(r));
                } else {
                  ++out.out_of_memory;
                  too_big.push_back(std::move(r));
                }
                // Bound the kept lists while searching large spaces.
                if (static_cast<int>(fits.size()) > 4 * std::max(top, 16)) keep_top(fits, top);
                if (static_cast<int>(too_big.size()) > 4 * std::max(top, 16))
                  keep_top(too_big, top);
              }
    }
  }
  keep_top(fits, top);
  keep_top(too_big, top);
  out.ranked = std::move(fits);
  out.too_big = std::move(too_big);
  return out;
}

std::vector<AdvisedPair> advise_with_layouts(const codesign::ModelShape& model,
                                             const codesign::DeviceSpec& device,
                                             const CommModel& comm, const SearchSpace& space,
                                             const codesign::AdvisorOptions& advisor,
                                             const PlanOptions& options) {
  codesign::AdvisorOptions opts = advisor;
  opts.training = true;
  const auto advice = codesign::advise(model, device, opts);
  std::vector<codesign::Candidate> shapes;
  codesign::Candidate input;
  input.shape = model;
  input.params = advice.input_params;
  input.totals = advice.input_totals;
  input.speedup = 1;
  input.model_speedup = 1;
  shapes.push_back(input);
  shapes.insert(shapes.end(), advice.candidates.begin(), advice.candidates.end());

  std::vector<AdvisedPair> out;
  for (const auto& c : shapes) {
    const auto found = search_layouts(c.shape, device, comm, space, 1, options);
    if (found.ranked.empty()) continue;
    out.push_back({c, found.ranked.front()});
  }
  std::sort(out.begin(), out.end(), [](const AdvisedPair& a, const AdvisedPair& b) {
    return a.best.step_time_s < b.best.step_time_s;
  });
  return out;
}

}  // namespace mcr::plan
