// The plot of `mcr shape sweep`.
#pragma once

#include <string>
#include <vector>

#include "mcr/codesign/advisor.hpp"

namespace mcr::cli {

/// Plots the sweep whose CSV is <prefix>.csv as <prefix>.<format> (png or svg) through a gnuplot
/// script <prefix>.gp, or prints a text plot when gnuplot is not on PATH. Throws InvalidArgument
/// naming --plot-format for another format.
void plot_sweep(const std::string& field, const std::vector<codesign::SweepPoint>& points,
                const std::string& prefix, const std::string& format, const std::string& model_name,
                const std::string& device_name);

}  // namespace mcr::cli
