#include "mcr/gemmbench/sweep.hpp"

#include <map>
#include <tuple>

#include "mcr/errors.hpp"

namespace mcr::codesign::bench {

std::vector<Gemm> grid_gemms(const std::vector<std::int64_t>& m, const std::vector<std::int64_t>& n,
                             const std::vector<std::int64_t>& k,
                             const std::vector<std::int64_t>& batch,
                             const std::vector<DType>& dtypes) {
  std::vector<Gemm> out;
  for (const auto dtype : dtypes) {
    for (const auto vm : m) {
      for (const auto vn : n) {
        for (const auto vk : k) {
          for (const auto vb : batch) {
            Gemm g;
            g.role = vb > 1 ? "grid_bmm" : "grid";
            g.m = vm;
            g.n = vn;
            g.k = vk;
            g.batch = vb;
            g.dtype = dtype;
            out.push_back(std::move(g));
          }
        }
      }
    }
  }
  return out;
}

MeasurementSet run_sweep(GemmRunner& runner, const std::vector<Gemm>& gemms,
                         const MeasureOptions& options, const SweepProgress& progress) {
  MeasurementSet set;
  set.backend = runner.backend();
  set.backend_description = runner.description();
  set.options = options;
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, DType>;
  std::map<Key, Timing> done;
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const auto& g = gemms[i];
    const Key key{g.m, g.n, g.k, g.batch, g.dtype};
    auto it = done.find(key);
    if (it == done.end()) {
      try {
        it = done.emplace(key, runner.time(g, options)).first;
      } catch (const UnsupportedError& e) {
        set.skipped.push_back(SkippedGemm{g, e.what()});
        continue;
      }
    }
    set.rows.push_back(GemmMeasurement{g, it->second});
    if (progress) progress(i, gemms.size(), set.rows.back());
  }
  return set;
}

}  // namespace mcr::codesign::bench
