// Text output of `mcr gemm` and `mcr calibrate`.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <vector>

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

/// `mcr gemm`'s progress on stderr: one line per GEMM (rewritten in place on a terminal).
void print_progress(std::size_t index, std::size_t total,
                    const codesign::bench::GemmMeasurement& m);
/// The GEMMs the runner rejected, with its reasons, on stderr.
void print_skipped(const codesign::bench::MeasurementSet& set);
/// --dry-run: the GEMMs that would run (the rows of `set`) with their GFLOP.
void print_dry_run(const codesign::bench::MeasurementSet& set);
/// The table form of a report to `path` (stdout when empty or "-"): the measurements, or with
/// `comparison` the predictions beside them. Throws mcr::Error naming -o when `path` cannot be
/// written.
void write_table(const std::string& path, const codesign::bench::MeasurementSet& set,
                 const std::vector<codesign::bench::ComparisonRow>* comparison);

/// Writes `text` to `path`, or to stdout when path is empty or "-". Throws mcr::Error on failure.
void write_output(const std::string& path, const std::string& text);

}  // namespace mcr::cli
