// Published training runs (model, layout, system, measured step time or TFLOP/s per GPU, source)
// and the planner's error on each. Format: docs/planner.md "Validation file".
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/codesign/model.hpp"
#include "mcr/plan/layout.hpp"
#include "mcr/plan/planner.hpp"

namespace mcr::plan {

struct PublishedRun {
  std::string name;
  std::string source;  ///< citation of the measured figure
  std::string system;  ///< catalog name or file
  codesign::ModelShape model;
  Layout layout;
  PlanOptions options;              ///< the run's optimizer state, gradient dtype, bucket size
  double step_time_s = 0;           ///< published step time (0 = not published)
  double tflops_per_gpu = 0;        ///< published TFLOP/s per GPU (0 = not published)
  double tokens_per_s_per_gpu = 0;  ///< published tokens per second per GPU (0 = not published)
  std::vector<std::string> assumptions;  ///< what the source does not state and the row assumes
};

struct ValidationRow {
  PublishedRun run;
  PlanResult predicted;
  double published = 0;   ///< step time if published, else TFLOP/s per GPU
  double prediction = 0;  ///< the same quantity, predicted
  double error = 0;       ///< prediction / published - 1
  /// "step_time_s", "tflops_per_gpu" or "tokens_per_s_per_gpu", whichever the run publishes
  /// first in that order.
  std::string quantity;
  /// The error as a step time: predicted / published step - 1 (for throughputs, published /
  /// predicted - 1), so that rows of every quantity compare.
  double step_error = 0;
};

/// Mean and largest |step_error| of a set of rows.
struct ErrorSummary {
  std::string group;  ///< e.g. "dgx-h100 bf16"
  std::size_t runs = 0;
  double mean_abs = 0;
  double max_abs = 0;
  double mean = 0;  ///< signed: > 0 means the planner is slower than the runs
};
/// Summaries per system and precision ("dgx-h100 bf16", "dgx-h100 fp8": every FP8 recipe together),
/// then over all rows ("all").
std::vector<ErrorSummary> summarize(const std::vector<ValidationRow>& rows);
/// {"runs": [each row with its source, assumptions, quantity, published, predicted, errors and
/// plan], "summary": summarize(rows)}.
nlohmann::json to_json(const std::vector<ValidationRow>& rows);

Layout layout_from_json(const nlohmann::json& j);
/// A run's "options": optimizer_bytes_per_param, grad_bytes_per_param, dp_bucket_mb, causal,
/// moe_glu_clamp.
PlanOptions options_from_json(const nlohmann::json& j);
std::vector<PublishedRun> load_published_runs(const std::filesystem::path& path);
/// Predicts every run on its catalog system and device, with the α-β links of the system.
std::vector<ValidationRow> validate_runs(const std::vector<PublishedRun>& runs);

}  // namespace mcr::plan
