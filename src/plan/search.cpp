#include "mcr/plan/search.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "mcr/codesign/calculators.hpp"
#include "mcr/errors.hpp"

namespace mcr::plan {

namespace {

// Bundled candidates the shape advisor is asked for in --advise, whatever --top (its default).
constexpr int kAdvisePool = 10;

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// A value a search is pinned to (a flag given with --search): below `least`, no layout could use
// it (a 0 would divide the GPU count by zero).
template <class T>
void check_pinned(const std::vector<T>& values, T least, std::string_view field) {
  for (const T v : values) {
    if (v < least)
      throw InvalidArgument(fmt::format("layout.{} {} must be >= {}", field, v, least));
  }
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
  if (space.gpus < 0) {
    throw InvalidArgument(
        fmt::format("space.gpus {} must be >= 1 (or 0: every GPU of the system)", space.gpus));
  }
  check_pinned(space.tp, 1, "tp");
  check_pinned(space.pp, 1, "pp");
  check_pinned(space.dp, 1, "dp");
  check_pinned(space.cp, 1, "cp");
  check_pinned(space.ep, 1, "ep");
  check_pinned(space.micro_batch, std::int64_t{1}, "micro_batch");
  check_pinned(space.interleave, 1, "interleave");
  check_pinned(space.zero, 0, "zero");
  const int gpus = space.gpus > 0 ? space.gpus : sys.total_gpus();
  if (gpus > sys.total_gpus()) {
    throw InvalidArgument(fmt::format("space.gpus {} exceeds system '{}' ({} GPUs)", gpus, sys.name,
                                      sys.total_gpus()));
  }
  if (space.global_batch < 1) {
    throw InvalidArgument(
        "a layout search needs space.global_batch: the number of sequences per step");
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
  const auto cps = or_default(space.cp, std::vector<int>{1});
  std::vector<int> ep_default{1};
  for (int e = 2; model.is_moe() && e <= model.experts && e <= gpus; e *= 2) {
    if (model.experts % e == 0) ep_default.push_back(e);
  }
  const auto eps = or_default(space.ep, ep_default);
  const auto dists = or_default(space.distributed_optimizer, std::vector<bool>{false, true});

  // What a layout can vary at a fixed parallel mesh; built once.
  struct Schedule {
    std::int64_t micro_batch;
    int interleave;
    Recompute recompute;
    int zero;
    bool distributed_optimizer;
  };
  std::vector<Schedule> schedules;
  for (std::int64_t mb : mbs)
    for (int il : ils)
      for (Recompute rc : rcs)
        for (int z : zs)
          for (bool dist : dists) {
            // The distributed optimizer is Megatron's form of ZeRO-1: one or the other.
            if (!(dist && z != 0)) schedules.push_back({mb, il, rc, z, dist});
          }

  if (schedules.empty()) {  // every schedule asked for pairs both forms of ZeRO-1
    throw InvalidArgument(fmt::format(
        "space.distributed_optimizer and space.zero {}: the distributed optimizer is Megatron's "
        "form of ZeRO stage 1; give one of them",
        zs.front()));
  }
  if (!space.recompute_modules.empty() &&
      std::find(rcs.begin(), rcs.end(), Recompute::selective) == rcs.end()) {
    throw InvalidArgument(fmt::format(
        "space.recompute_modules ({}) needs selective recomputation among space.recompute",
        fmt::join(space.recompute_modules, ", ")));
  }

  SearchResult out;
  std::vector<PlanResult> fits, too_big;
  const auto reject = [&](std::string why) {
    ++out.rejected;
    if (out.first_rejection.empty()) out.first_rejection = std::move(why);
  };
  const auto consider = [&](const Layout& l) {
    if (auto why = layout_error(l, model, sys); !why.empty()) {
      reject(std::move(why));
      return;
    }
    ++out.evaluated;
    auto r = plan_step(model, device, comm, l, options);
    if (r.memory.fits) {
      fits.push_back(std::move(r));
    } else {
      ++out.out_of_memory;
      too_big.push_back(std::move(r));
    }
    // Bound the kept lists while searching large spaces (in size_t: 4 x a --top near INT_MAX
    // overflowed an int).
    const std::size_t bound = 4 * static_cast<std::size_t>(std::max(top, 16));
    if (fits.size() > bound) keep_top(fits, top);
    if (too_big.size() > bound) keep_top(too_big, top);
  };
  Layout l;  // the fields the space pins
  l.gpus = gpus;
  l.etp = space.etp;
  l.capacity_factor = space.capacity_factor;
  l.moe_dispatcher = space.moe_dispatcher;
  l.uneven_pipeline = space.uneven_pipeline;
  l.fp8 = space.fp8;
  l.fp8_params = space.fp8_params;
  l.tp_comm_overlap = space.tp_comm_overlap;
  l.pp_comm_overlap = space.pp_comm_overlap;
  l.global_batch = space.global_batch;
  l.allow_tp_across_nodes = space.allow_tp_across_nodes;
  l.dp_overlap = space.dp_overlap;
  for (int tp : tps)
    for (int cp : cps)
      for (int pp : pps) {
        // In 64 bits, stopping once past the GPUs, so that no product wraps (pinned values of
        // 65536 wrapped the int product to 0).
        long long model_parallel = 1;
        for (const int factor : {tp, cp, pp}) {
          model_parallel *= factor;
          if (model_parallel > gpus) break;
        }
        if (model_parallel > gpus || gpus % model_parallel != 0) {
          reject(
              fmt::format("tp {} x cp {} x pp {} does not divide the {} GPUs", tp, cp, pp, gpus));
          continue;
        }
        const int dp = static_cast<int>(gpus / model_parallel);
        if (!space.dp.empty() &&
            std::find(space.dp.begin(), space.dp.end(), dp) == space.dp.end()) {
          reject(fmt::format("tp {} x cp {} x pp {} on {} GPUs leaves dp {}, not the dp asked for",
                             tp, cp, pp, gpus, dp));
          continue;
        }
        l.tp = tp;
        l.cp = cp;
        l.pp = pp;
        l.dp = dp;
        const auto sps = or_default(space.sequence_parallel, tp > 1 ? std::vector<bool>{false, true}
                                                                    : std::vector<bool>{false});
        for (int ep : eps)
          for (bool sp : sps)
            for (const auto& sc : schedules) {
              l.ep = ep;
              l.sequence_parallel = sp;
              l.micro_batch = sc.micro_batch;
              l.interleave = sc.interleave;
              l.recompute = sc.recompute;
              // The modules asked for are what selective recomputation recomputes; the other
              // schedules keep (none) or recompute (full) everything.
              l.recompute_modules = sc.recompute == Recompute::selective
                                        ? space.recompute_modules
                                        : std::vector<std::string>{};
              l.zero = sc.zero;
              l.distributed_optimizer = sc.distributed_optimizer;
              consider(l);
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
  // The advisor ranks its bundled candidates by layer throughput, the pairs here by step time: a
  // pool of at least the default list's size, so that a small `top` keeps the fastest steps, not
  // the advisor's first few (--top 1 could show another first pair than --top 10).
  opts.top = std::max(advisor.top, kAdvisePool);
  const auto advice = codesign::advise(model, device, opts);
  const auto fastest_layout = [&](const codesign::ModelShape& shape) {
    return search_layouts(shape, device, comm, space, 1, options);
  };
  const auto by_step_time = [](const AdvisedPair& a, const AdvisedPair& b) {
    return a.best.step_time_s < b.best.step_time_s;
  };

  std::vector<AdvisedPair> pairs;
  for (const auto& candidate : advice.candidates) {
    const auto found = fastest_layout(candidate.shape);
    if (!found.ranked.empty()) pairs.push_back({candidate, found.ranked.front()});
  }
  std::stable_sort(pairs.begin(), pairs.end(), by_step_time);
  if (advisor.top > 0 && pairs.size() > static_cast<std::size_t>(advisor.top))
    pairs.resize(static_cast<std::size_t>(advisor.top));

  // The input shape's pair is the baseline the others are read against: always listed (when a
  // layout fits), with the fastest `top` candidates (single-field fixes and bundles alike).
  if (const auto found = fastest_layout(model); !found.ranked.empty()) {
    codesign::Candidate input;
    input.shape = model;
    input.params = advice.input_params;
    input.totals = advice.input_totals;
    input.speedup = 1;
    input.model_speedup = 1;
    pairs.insert(pairs.begin(), {input, found.ranked.front()});
    std::stable_sort(pairs.begin(), pairs.end(), by_step_time);
  }
  return pairs;
}

}  // namespace mcr::plan
