// JSON and CSV forms of the analyser's results (schema: docs/shape-json.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/advisor.hpp"
#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/gemm_model.hpp"
#include "mcr/codesign/guidelines.hpp"

namespace mcr::codesign {

/// One GEMM with its prediction: role, pass, m, n, k, batch, dtype, flops, bytes,
/// arithmetic_intensity, predicted_time_s, predicted_tflops, tile, waves, ... explanation.
nlohmann::json gemm_result_json(const Gemm& gemm, const GemmPrediction& prediction);
GemmResult gemm_result_from_json(const nlohmann::json& j);

nlohmann::json analysis_json(const ModelAnalysis& analysis);
/// Inverse of analysis_json: analysis_json(analysis_from_json(j)) == j for any j it produced.
ModelAnalysis analysis_from_json(const nlohmann::json& j);

nlohmann::json findings_json(const std::vector<Finding>& findings);
nlohmann::json advice_json(const Advice& advice);
nlohmann::json params_json(const ParamCount& p);
nlohmann::json flops_json(const FlopCount& f);
nlohmann::json memory_json(const MemoryEstimate& m);

/// CSV with a header row; one row per GEMM (layer GEMMs, then logits).
std::string analysis_csv(const ModelAnalysis& analysis);
std::string sweep_csv(const std::string& field, const std::vector<SweepPoint>& points);

}  // namespace mcr::codesign
