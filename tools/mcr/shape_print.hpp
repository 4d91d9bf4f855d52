// Human-readable tables for `mcr shape`.
#pragma once

#include <string>
#include <vector>

#include "mcr/codesign/advisor.hpp"
#include "mcr/codesign/analysis.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/codesign/guidelines.hpp"

namespace mcr::cli {

std::string format_device(const codesign::DeviceSpec& d, codesign::DType dtype);
std::string format_gemm_table(const codesign::ModelAnalysis& a, const codesign::DeviceSpec& d);
std::string format_totals(const codesign::ModelAnalysis& a);
std::string format_findings(const std::vector<codesign::Finding>& findings);
/// Before/after table: the input, then one-field changes, then bundled ones; gains below the
/// advisor's uncertainty are marked as not significant.
std::string format_advice(const codesign::Advice& advice);
/// One line per forward GEMM whose prediction moved by 1% or more, with the factors that moved.
std::string format_why_faster(const codesign::ModelAnalysis& before,
                              const codesign::ModelAnalysis& after);
/// Text plot of model TFLOP/s over a sweep (for terminals without gnuplot); "" if < 2 points.
std::string ascii_plot(const std::string& field, const std::vector<codesign::SweepPoint>& pts,
                       int width = 72, int height = 12);
std::string format_calculators(const codesign::ParamCount& p, const codesign::FlopCount& f,
                               const codesign::MemoryEstimate& train,
                               const codesign::MemoryEstimate& infer);
std::string format_sweep(const std::string& field, const std::vector<codesign::SweepPoint>& pts);
/// 6.74B, 125.2M, ...
std::string human_count(double x);

}  // namespace mcr::cli
