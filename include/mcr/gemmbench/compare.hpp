// Prediction against measurement, per GEMM and over a sweep.
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/device.hpp"
#include "mcr/codesign/gemm_model.hpp"
#include "mcr/gemmbench/measurement.hpp"

namespace mcr::codesign::bench {

struct ComparisonRow {
  GemmMeasurement measured;
  GemmPrediction predicted;
  double measured_tflops = 0;
  double predicted_tflops = 0;
  double ratio = 0;          ///< predicted / measured TFLOP/s
  double abs_pct_error = 0;  ///< |predicted - measured| / measured x 100
};

struct ComparisonSummary {
  std::size_t count = 0;
  double median_abs_pct_error = 0;
  double p90_abs_pct_error = 0;  ///< 90th percentile of |error| (quantile())
  double median_ratio = 0;
  /// Spearman rank correlation of predicted vs measured TFLOP/s; NaN with fewer than 2 rows.
  double spearman = 0;
};

/// Predicts every measured GEMM on `device`.
std::vector<ComparisonRow> compare(std::span<const GemmMeasurement> measured,
                                   const DeviceSpec& device);
ComparisonSummary summarize(std::span<const ComparisonRow> rows);

void to_json(nlohmann::json& j, const ComparisonRow& r);
void to_json(nlohmann::json& j, const ComparisonSummary& s);

/// {"device", "rows", "summary"}: the comparison a report adds to its measurements' JSON.
nlohmann::json comparison_json(std::span<const ComparisonRow> rows, const std::string& device_name);
/// One CSV row per comparison (role, dims, dtype, median seconds, measured and predicted TFLOP/s,
/// ratio, |error| %), after a header line.
void write_comparison_csv(std::ostream& out, std::span<const ComparisonRow> rows);

}  // namespace mcr::codesign::bench
