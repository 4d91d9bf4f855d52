// Output of `mcr tune`: a table file's check, the tuned entries, one line per measured point, and
// the plots next to the table.
#pragma once

#include <string>
#include <vector>

#include "mcr/bench/refine.hpp"
#include "mcr/bench/tune.hpp"
#include "mcr/comm/selection.hpp"

namespace mcr::cli {

/// Checks the table at `path` (bench::validate_table_text) and prints the verdict; returns the
/// exit code: 0 valid, 1 with problems. Throws InvalidArgument naming --validate when unreadable.
int validate_table_file(const std::string& path);
/// The entries as a table: op, dtype class, ranks, topology, form and the ranges' backends.
void print_entries(const TuningTable& table);
/// `mcr tune --refine`: per operation and size of the traces, each backend's median and count,
/// the table's backend before and after, or why the point was not refined.
void print_refined_points(const std::vector<bench::RefinedPoint>& points);
/// `mcr tune --refine`: the tuned sizes, not in the traces, whose backend the rebuilt entry
/// changed (nothing when there are none).
void print_shifted_sizes(const std::vector<bench::ShiftedSize>& shifted);
/// Rank 0: a backend that gave wrong values (always), then the point's timings (unless quiet).
void print_tune_point(const bench::TunePoint& point, bool quiet);
/// `mcr tune --plot`: images next to `output` (its name without .json); a failure is a message.
void plot_next_to(const TuningTable& table, const std::string& output, const std::string& format);

}  // namespace mcr::cli
