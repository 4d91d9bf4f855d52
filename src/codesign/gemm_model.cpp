#include "mcr/codesign/gemm_model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "mcr/errors.hpp"

namespace mcr::codesign {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Split-K is what libraries do when the output has too few tiles to fill the machine: each slice of
// K runs as its own tile and the partial sums are reduced afterwards.
constexpr int kSplitCandidates[] = {1, 2, 4, 8};

GemmPrediction predict_one(const Gemm& g, const DeviceSpec& dev, const Tile& tile, int split) {
  const EfficiencyParams& e = dev.efficiency;
  GemmPrediction p;
  p.tile = tile;
  p.split_k = split;
  const int eb = dtype_bytes(g.dtype);
  const std::int64_t dims[3] = {g.m, g.n, g.k};
  p.alignment_factor = 1.0;
  for (int i = 0; i < 3; ++i) {
    p.alignment_bytes[static_cast<std::size_t>(i)] = pow2_divisor(dims[i]) * eb;
    p.alignment_factors[static_cast<std::size_t>(i)] =
        alignment_tier_factor(e, p.alignment_bytes[static_cast<std::size_t>(i)]);
    p.alignment_factor *= p.alignment_factors[static_cast<std::size_t>(i)];
  }
  const std::int64_t tiles_m = ceil_div(g.m, tile.m);
  const std::int64_t tiles_n = ceil_div(g.n, tile.n);
  p.blocks = g.batch * tiles_m * tiles_n * split;
  p.waves = ceil_div(p.blocks, dev.compute_units);
  p.wave_efficiency =
      static_cast<double>(p.blocks) / static_cast<double>(p.waves * dev.compute_units);
  p.tile_efficiency =
      (static_cast<double>(g.m) * static_cast<double>(g.n)) /
      (static_cast<double>(tiles_m * tile.m) * static_cast<double>(tiles_n * tile.n));
  const double k_per_tile = static_cast<double>(ceil_div(g.k, split));
  p.k_efficiency = k_per_tile / (k_per_tile + e.k_overhead);

  // One compute unit's share of the achievable peak; a tile occupies one unit for the whole K loop.
  const double unit_flops_per_s =
      dev.peak_for(g.dtype) * 1e12 * e.peak_fraction / dev.compute_units;
  const double tile_time = 2.0 * tile.m * tile.n * (k_per_tile + e.k_overhead) /
                           (unit_flops_per_s * tile.efficiency * p.alignment_factor);
  p.compute_time_s = static_cast<double>(p.waves) * tile_time;

  // Split-K writes and re-reads fp32 partial sums of C once per extra slice.
  const double partial_bytes = split > 1 ? static_cast<double>(g.batch) * static_cast<double>(g.m) *
                                               static_cast<double>(g.n) * 4.0 * 2.0 * split
                                         : 0.0;
  p.memory_time_s =
      (g.bytes() + partial_bytes) / (dev.memory_bandwidth_gbs * 1e9 * e.memory_efficiency);
  p.memory_bound = p.memory_time_s > p.compute_time_s;
  // A split-K GEMM launches a second kernel that reduces the partial sums.
  const double launches = split > 1 ? 2.0 : 1.0;
  const double busy = std::max(p.compute_time_s, p.memory_time_s) + launches * e.launch_overhead_s;
  p.latency_bound = e.latency_floor_s > busy;
  p.time_s = std::max(busy, e.latency_floor_s);
  p.tflops = g.flops() / p.time_s / 1e12;
  return p;
}

std::string explain(const Gemm& g, const DeviceSpec& dev, const GemmPrediction& p) {
  std::string s = fmt::format("tile {}x{}", p.tile.m, p.tile.n);
  if (p.split_k > 1) s += fmt::format(" split-K {}", p.split_k);
  s += fmt::format(" (tile eff {:.1f}%); {} blocks on {} units = {} wave{} (wave eff {:.1f}%)",
                   100 * p.tile_efficiency, p.blocks, dev.compute_units, p.waves,
                   p.waves == 1 ? "" : "s", 100 * p.wave_efficiency);
  s += fmt::format("; K/tile={} (k eff {:.1f}%)", (g.k + p.split_k - 1) / p.split_k,
                   100 * p.k_efficiency);
  const char* names[3] = {"m", "n", "k"};
  const std::int64_t dims[3] = {g.m, g.n, g.k};
  const std::int64_t want = dev.alignment_bytes;
  std::string misaligned;
  for (std::size_t i = 0; i < 3; ++i) {
    if (p.alignment_bytes[i] < want) {
      misaligned +=
          fmt::format("{}{}={} is {}-byte aligned (x{:.2f})", misaligned.empty() ? "" : ", ",
                      names[i], dims[i], p.alignment_bytes[i], p.alignment_factors[i]);
    }
  }
  if (misaligned.empty()) {
    s += fmt::format("; m, n, k all {}-byte aligned", want);
  } else {
    s += fmt::format("; misaligned (rule: multiples of {} B = {} {} elements): {}", want,
                     dev.alignment_elements(g.dtype), to_string(g.dtype), misaligned);
  }
  if (p.latency_bound) {
    s += fmt::format("; latency bound (floor {:.1f} us)", p.time_s * 1e6);
  } else if (p.memory_bound) {
    s +=
        fmt::format("; memory bound (intensity {:.1f} FLOP/B: DRAM {:.2f} us vs compute {:.2f} us)",
                    g.arithmetic_intensity(), p.memory_time_s * 1e6, p.compute_time_s * 1e6);
  } else {
    s += fmt::format("; compute bound (intensity {:.0f} FLOP/B)", g.arithmetic_intensity());
  }
  return s;
}

}  // namespace

std::int64_t pow2_divisor(std::int64_t d) {
  return d & -d;
}

double alignment_tier_factor(const EfficiencyParams& params, std::int64_t bytes) {
  // The tier with the largest min_bytes that this alignment reaches; below every tier, the lowest
  // tier's factor. Independent of the order of the list (hand-built params need not be sorted).
  const AlignmentTier* reached = nullptr;
  const AlignmentTier* lowest = nullptr;
  for (const auto& tier : params.alignment_tiers) {
    if (lowest == nullptr || tier.min_bytes < lowest->min_bytes) lowest = &tier;
    if (bytes >= tier.min_bytes && (reached == nullptr || tier.min_bytes > reached->min_bytes)) {
      reached = &tier;
    }
  }
  if (reached != nullptr) return reached->factor;
  return lowest != nullptr ? lowest->factor : 1.0;
}

namespace {

GemmPrediction best_split(const Gemm& gemm, const DeviceSpec& device, const Tile& tile) {
  GemmPrediction best;
  bool have = false;
  // Every split is a candidate for every shape (the cost model makes useless splits lose), so that
  // the prediction stays monotone in m, n and k.
  for (const int split : kSplitCandidates) {
    GemmPrediction p = predict_one(gemm, device, tile, split);
    if (!have || p.time_s < best.time_s) {
      best = p;
      have = true;
    }
  }
  return best;
}

}  // namespace

GemmPrediction predict_with_tile(const Gemm& gemm, const DeviceSpec& device, const Tile& tile) {
  gemm.validate();
  if (tile.m <= 0 || tile.n <= 0 || !(tile.efficiency > 0)) {
    throw InvalidArgument(fmt::format("tile {}x{} (efficiency {}) must have positive sizes", tile.m,
                                      tile.n, tile.efficiency));
  }
  GemmPrediction best = best_split(gemm, device, tile);
  best.explanation = explain(gemm, device, best);
  return best;
}

GemmPrediction predict(const Gemm& gemm, const DeviceSpec& device) {
  gemm.validate();
  if (device.tiles.empty()) {
    throw InvalidArgument(fmt::format("device '{}' lists no candidate tiles", device.name));
  }
  GemmPrediction best;
  bool have = false;
  // Ties keep the earlier tile: catalog order is the preference order (largest tiles first).
  for (const Tile& tile : device.tiles) {
    GemmPrediction p = best_split(gemm, device, tile);
    if (!have || p.time_s < best.time_s) {
      best = p;
      have = true;
    }
  }
  best.explanation = explain(gemm, device, best);
  return best;
}

}  // namespace mcr::codesign
