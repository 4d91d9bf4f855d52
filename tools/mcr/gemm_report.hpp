// Text output shared by `mcr gemm` and `mcr calibrate`.
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "mcr/gemmbench/calibrate.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/measurement.hpp"

namespace CLI {
class App;
}

namespace mcr::cli {

/// "mcr <subcommand> --opt value ..." rebuilt from what was parsed, so results can say how to
/// rerun.
std::string rerun_command(const CLI::App& subcommand);

/// Measurements as an aligned table.
void print_measurements_table(std::FILE* out, const codesign::bench::MeasurementSet& set);
/// Measurements with predictions, ratio and error, then the sweep summary.
void print_comparison_table(std::FILE* out, const codesign::bench::MeasurementSet& set,
                            std::span<const codesign::bench::ComparisonRow> rows,
                            const std::string& device_name);
void print_summary_line(std::FILE* out, const char* label,
                        const codesign::bench::ComparisonSummary& s);
void print_calibration(std::FILE* out, const codesign::bench::CalibrationResult& r,
                       const codesign::DeviceSpec& before);

/// Writes `text` to `path`, or to stdout when path is empty or "-". Throws mcr::Error on failure.
void write_output(const std::string& path, const std::string& text);

}  // namespace mcr::cli
