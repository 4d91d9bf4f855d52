// A compute device as the GEMM efficiency model sees it: compute units that each run one output
// tile at a time, a dense peak per dtype, memory bandwidth, alignment tiers, candidate tiles, and
// the calibratable efficiency factors. GPUs, AMD accelerators and CPUs (cores as compute units,
// SIMD/FMA peak, cache-sized tiles) all fit this description. Devices are data: see
// docs/codesign.md.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/dtype.hpp"

namespace mcr::codesign {

/// One output tile shape a GEMM kernel can use. `efficiency` is its throughput relative to the best
/// tile when fully used (bigger tiles reuse more data per load), in (0, 1].
struct Tile {
  int m = 0;
  int n = 0;
  double efficiency = 1.0;
};
bool operator==(const Tile& a, const Tile& b);

/// Efficiency factor for a dimension whose largest power-of-two divisor is at least `min_bytes`
/// bytes (d & -d times the element size). Tiers are matched from the largest min_bytes down.
struct AlignmentTier {
  int min_bytes = 1;
  double factor = 1.0;
};
bool operator==(const AlignmentTier& a, const AlignmentTier& b);

/// The calibratable part of a device. `mcr calibrate` fits these to measurements.
struct EfficiencyParams {
  /// Achievable fraction of the vendor dense peak for a large, aligned, full-wave GEMM
  /// (e.g. measured max-achievable matmul FLOPS / spec peak).
  double peak_fraction = 0.85;
  /// Alignment tiers, any order in JSON; stored sorted by min_bytes descending. A dimension below
  /// every tier gets the smallest tier's factor.
  std::vector<AlignmentTier> alignment_tiers;
  /// Fixed per-tile cost in K elements (pipeline fill, epilogue): a tile's time is proportional to
  /// K + k_overhead, so short reductions (small head dims) run below peak.
  double k_overhead = 128.0;
  /// Fraction of the memory bandwidth a streaming GEMM achieves (roofline for low-intensity GEMMs).
  double memory_efficiency = 0.8;
  /// Seconds added to every kernel launch.
  double launch_overhead_s = 2e-6;
  /// No GEMM finishes faster than this (tiny GEMMs are latency bound).
  double latency_floor_s = 4e-6;
};
bool operator==(const EfficiencyParams& a, const EfficiencyParams& b);

/// How far the device's predictions were from GEMMs measured on it that its calibration did not
/// fit: the model's error bar on this device (the advisor's significance threshold uses it).
struct PredictionError {
  std::size_t count = 0;            ///< held-out GEMMs the statistics are over
  double median_abs_pct_error = 0;  ///< median |predicted - measured| / measured x 100
  double p90_abs_pct_error = 0;     ///< 90th percentile of the same
  std::string source;               ///< measurements file, split and seed
};
bool operator==(const PredictionError& a, const PredictionError& b);

struct DeviceSpec {
  std::string name;          ///< catalog key, e.g. "a100-80gb"
  std::string description;   ///< e.g. "NVIDIA A100 SXM4 80GB"
  std::string vendor;        ///< nvidia, amd, cpu, ...
  std::string arch;          ///< e.g. "ampere sm80"
  int compute_units = 0;     ///< SMs (NVIDIA), CUs (AMD) or cores (CPU): one tile each per wave
  double clock_mhz = 0;      ///< clock the dense peaks are quoted at
  double max_clock_mhz = 0;  ///< highest boost clock (0 = unknown)
  std::map<DType, double> peak_tflops;  ///< dense (no sparsity) peak per dtype
  double memory_bandwidth_gbs = 0;      ///< GB/s, decimal
  /// Capacity as marketed, in GB, read as binary: an "80GB" A100 has 80 GiB (what `mcr plan` and
  /// the memory_fit check compare with).
  double memory_gb = 0;
  double l2_bytes = 0;
  /// Alignment (bytes) at which Tensor Cores run fastest: 16 (V100 rule), 128 (A100 rule).
  int alignment_bytes = 128;
  std::vector<Tile> tiles;
  EfficiencyParams efficiency;
  /// Citation per field ("compute_units", "peak_tflops.bf16", ...). Kept verbatim on save.
  std::map<std::string, std::string> sources;
  /// Held-out error of a calibration; absent for an entry no measurement has judged.
  std::optional<PredictionError> prediction_error;

  /// Dense peak for `dtype` in TFLOP/s; throws mcr::InvalidArgument if the device has none.
  double peak_for(DType dtype) const;
  bool supports(DType dtype) const;
  /// Alignment rule in elements of `dtype` (alignment_bytes / element size, at least 1).
  int alignment_elements(DType dtype) const;
  /// Throws mcr::InvalidArgument naming the field when a value is missing or out of range.
  void validate() const;
};
bool operator==(const DeviceSpec& a, const DeviceSpec& b);

/// nlohmann-json hooks (format: docs/codesign.md "Device catalog format").
void to_json(nlohmann::json& j, const DeviceSpec& d);
void from_json(const nlohmann::json& j, DeviceSpec& d);
void to_json(nlohmann::json& j, const EfficiencyParams& e);
void from_json(const nlohmann::json& j, EfficiencyParams& e);
void to_json(nlohmann::json& j, const Tile& t);
void to_json(nlohmann::json& j, const PredictionError& e);
void from_json(const nlohmann::json& j, PredictionError& e);
void from_json(const nlohmann::json& j, Tile& t);

/// Reads and validates a device file. Errors name the file and the field.
DeviceSpec load_device(const std::filesystem::path& path);
/// Writes a device file (pretty JSON).
void save_device(const DeviceSpec& device, const std::filesystem::path& path);
/// Loads `<data_dir>/devices/<name>.json`; an unknown name lists the catalog in the error.
DeviceSpec device_from_catalog(const std::string& name);
/// Where `device`'s dense peak for `dtype` comes from: its sources entry for that peak (and the
/// general "peak_tflops" note when there is one), or "not documented".
std::string peak_source(const DeviceSpec& device, DType dtype);
/// Catalog names, sorted.
std::vector<std::string> catalog_devices();
/// `spec` is a catalog name or a path to a JSON file (anything containing '/' or ending in .json).
DeviceSpec resolve_device(const std::string& spec);

}  // namespace mcr::codesign
