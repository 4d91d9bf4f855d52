// Text output of `mcr plan`: one prediction with its breakdown, a ranked layout table, and the
// (shape, layout) pairs of --advise.
#pragma once

#include <string>
#include <vector>

#include "mcr/plan/search.hpp"
#include "mcr/plan/validation.hpp"

namespace mcr::cli {

/// "device peak: bf16 312 TFLOP/s (source)" and a newline.
std::string peak_line(const codesign::DeviceSpec& device, codesign::DType dtype);
std::string format_plan(const plan::PlanResult& r);
std::string format_search(const plan::SearchResult& s, double seconds);
std::string format_advice(const std::vector<plan::AdvisedPair>& pairs);
std::string format_validation(const std::vector<plan::ValidationRow>& rows);

}  // namespace mcr::cli
