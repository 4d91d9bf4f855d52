// Everything the analyser says about one model on one device, as `mcr shape` reports it: the GEMM
// analysis, the guideline and memory findings, parameter, FLOP and memory counts, and (optionally)
// the shape advisor's faster candidates; with its JSON form (docs/shape-json.md).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/advisor.hpp"
#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/codesign/guidelines.hpp"
#include "mcr/codesign/model.hpp"

namespace mcr::codesign {

struct ShapeReportOptions {
  bool training = false;   ///< backward (dgrad, wgrad) GEMMs as well
  bool advise = true;      ///< run the shape advisor
  AdvisorOptions advisor;  ///< its settings (training is taken from above)
  ParallelLayout layout;   ///< for the memory estimates and checks
};

struct ShapeReport {
  ModelAnalysis analysis;
  bool advised = false;
  Advice advice;                  ///< set when advised
  std::vector<Finding> findings;  ///< the guidelines', then the memory check's
  ParamCount params;
  FlopCount flops;
  MemoryEstimate training_memory;
  MemoryEstimate inference_memory;
};

/// Analyses `model` on `device`. The advisor analyses the input first; its analysis is reused
/// instead of repeated. Throws mcr::InvalidArgument for a layout the estimates reject.
ShapeReport analyse_shape(const ModelShape& model, const DeviceSpec& device,
                          const ShapeReportOptions& options);

/// The report's JSON: the analysis, "params", "flops", "memory" (training, inference, the device's
/// memory and the layout), "guidelines" and, when advised, "advice". Where the model came from
/// ("inputs") is the caller's to add.
nlohmann::json to_json(const ShapeReport& report, const ModelShape& model, const DeviceSpec& device,
                       const ShapeReportOptions& options);

}  // namespace mcr::codesign
