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
  double step_time_s = 0;     ///< published step time (0 = not published)
  double tflops_per_gpu = 0;  ///< published TFLOP/s per GPU (0 = not published)
};

struct ValidationRow {
  PublishedRun run;
  PlanResult predicted;
  double published = 0;   ///< step time if published, else TFLOP/s per GPU
  double prediction = 0;  ///< the same quantity, predicted
  double error = 0;       ///< prediction / published - 1
  std::string quantity;   ///< "step_time_s" or "tflops_per_gpu"
};

Layout layout_from_json(const nlohmann::json& j);
std::vector<PublishedRun> load_published_runs(const std::filesystem::path& path);
/// Predicts every run on its catalog system and device, with the α-β links of the system.
std::vector<ValidationRow> validate_runs(const std::vector<PublishedRun>& runs);

}  // namespace mcr::plan
