#include "mcr/gemmbench/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "mcr/gemmbench/stats.hpp"

namespace mcr::codesign::bench {

std::vector<ComparisonRow> compare(std::span<const GemmMeasurement> measured,
                                   const DeviceSpec& device) {
  std::vector<ComparisonRow> rows;
  rows.reserve(measured.size());
  for (const auto& m : measured) {
    ComparisonRow row;
    row.measured = m;
    row.predicted = predict(m.gemm, device);
    row.measured_tflops = m.tflops();
    row.predicted_tflops = row.predicted.tflops;
    row.ratio = row.predicted_tflops / row.measured_tflops;
    row.abs_pct_error = abs_pct_error(row.predicted_tflops, row.measured_tflops);
    rows.push_back(std::move(row));
  }
  return rows;
}

ComparisonSummary summarize(std::span<const ComparisonRow> rows) {
  ComparisonSummary s;
  s.count = rows.size();
  if (rows.empty()) {
    s.median_abs_pct_error = s.p90_abs_pct_error = s.median_ratio = s.spearman =
        std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  std::vector<double> predicted, measured, ratios, errors;
  for (const auto& r : rows) {
    predicted.push_back(r.predicted_tflops);
    measured.push_back(r.measured_tflops);
    ratios.push_back(r.ratio);
    errors.push_back(r.abs_pct_error);
  }
  s.median_abs_pct_error = median_abs_pct_error(predicted, measured);
  s.p90_abs_pct_error = quantile(std::move(errors), 0.9);
  s.median_ratio = median(ratios);
  s.spearman =
      rows.size() >= 2 ? spearman(predicted, measured) : std::numeric_limits<double>::quiet_NaN();
  return s;
}

void to_json(nlohmann::json& j, const ComparisonRow& r) {
  j = r.measured;
  j["predicted_time_s"] = r.predicted.time_s;
  j["predicted_tflops"] = r.predicted_tflops;
  j["measured_tflops"] = r.measured_tflops;
  j["ratio"] = r.ratio;
  j["abs_pct_error"] = r.abs_pct_error;
  j["explanation"] = r.predicted.explanation;
}

void to_json(nlohmann::json& j, const ComparisonSummary& s) {
  // NaN is not JSON: absent statistics are written as null.
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  j = {{"count", s.count},
       {"median_abs_pct_error", number(s.median_abs_pct_error)},
       {"p90_abs_pct_error", number(s.p90_abs_pct_error)},
       {"median_ratio", number(s.median_ratio)},
       {"spearman", number(s.spearman)}};
}

nlohmann::json comparison_json(std::span<const ComparisonRow> rows,
                               const std::string& device_name) {
  return {{"device", device_name}, {"rows", rows}, {"summary", summarize(rows)}};
}

void write_comparison_csv(std::ostream& out, std::span<const ComparisonRow> rows) {
  out << "role,m,n,k,batch,dtype,median_s,measured_tflops,predicted_tflops,ratio,abs_pct_error\n";
  for (const auto& r : rows) {
    const auto& g = r.measured.gemm;
    out << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", g.role, g.m, g.n,
                       g.k, g.batch, to_string(g.dtype), r.measured.timing.median_s,
                       r.measured_tflops, r.predicted_tflops, r.ratio, r.abs_pct_error);
  }
}

}  // namespace mcr::codesign::bench
