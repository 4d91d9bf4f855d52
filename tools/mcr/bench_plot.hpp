// `mcr tune --plot`: latency against size per op, one line per backend, the tuned choice marked.
#pragma once

#include <string>
#include <vector>

#include "mcr/comm/selection.hpp"

namespace mcr::cli {

/// Throws InvalidArgument unless `format` is one plot_table() renders (png, svg): checked before a
/// tune measures, and again by plot_table().
void check_plot_format(const std::string& format);

/// Writes <prefix>.<op>.dat files and a gnuplot script <prefix>.gp, then runs gnuplot to render
/// <prefix>.<op>.<format> (format png or svg). Returns the images written; throws mcr::Error with a
/// clear message when gnuplot is not installed (the data and script are still left in place).
std::vector<std::string> plot_table(const TuningTable& table, const std::string& prefix,
                                    const std::string& format);

}  // namespace mcr::cli
