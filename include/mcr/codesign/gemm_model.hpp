// Predicted time of one GEMM on one device: best tile among the candidates, tile quantization, wave
// quantization over the compute units, alignment tier of each dimension, memory roofline and a
// latency floor. Pure and deterministic: the same (Gemm, DeviceSpec) always gives the same answer,
// and only m, n, k, batch and dtype of the Gemm matter (not its role or pass).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm.hpp"

namespace mcr::codesign {

struct GemmPrediction {
  double time_s = 0;
  double tflops = 0;
  Tile tile;                    ///< chosen tile
  std::int64_t blocks = 0;      ///< batch * ceil(M/Mt) * ceil(N/Nt) * split_k
  std::int64_t waves = 0;       ///< ceil(blocks / compute_units)
  int split_k = 1;              ///< K split across this many tiles (only when one wave is not full)
  double wave_efficiency = 1;   ///< blocks / (waves * compute_units), in (0, 1]
  double tile_efficiency = 1;   ///< M*N / (padded M * padded N), in (0, 1]
  double k_efficiency = 1;      ///< K / (K + k_overhead)
  double alignment_factor = 1;  ///< product of the per-dimension tier factors
  /// Largest power-of-two divisor of m, n, k, in bytes (d & -d times the element size).
  std::array<std::int64_t, 3> alignment_bytes{};
  /// Tier factor of m, n, k.
  std::array<double, 3> alignment_factors{1, 1, 1};
  double compute_time_s = 0;
  double memory_time_s = 0;
  bool memory_bound = false;
  bool latency_bound = false;
  std::string explanation;
};

/// Throws mcr::InvalidArgument for a bad Gemm or a dtype the device lacks.
GemmPrediction predict(const Gemm& gemm, const DeviceSpec& device);

/// Same prediction for one fixed tile (used by tools that compare tiles). `tile` need not be in the
/// device's candidate list.
GemmPrediction predict_with_tile(const Gemm& gemm, const DeviceSpec& device, const Tile& tile);

/// Largest power of two dividing d (d & -d); 0 for d == 0.
std::int64_t pow2_divisor(std::int64_t d);

/// The factor of the tier that `bytes` of alignment falls into.
double alignment_tier_factor(const EfficiencyParams& params, std::int64_t bytes);

}  // namespace mcr::codesign
