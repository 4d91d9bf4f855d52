// Output of `mcr bench`: the sweep's rows (bench::SweepRow) as text (nccl-tests style), CSV and
// JSON, and the --compare-auto table and JSON rows (bench::ComparePoint).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/bench/compare.hpp"
#include "mcr/bench/sweep.hpp"

namespace mcr::cli {

using BenchRow = bench::SweepRow;

enum class Format { text, csv, json };

/// Streams rows as they complete (text and CSV) or collects them (JSON, printed by finish()).
class RowPrinter {
 public:
  /// Prints to `out` (stdout by default; the caller owns and closes any other stream).
  RowPrinter(Format format, std::string time_reduce, int ranks, std::FILE* out = stdout);
  void add(const BenchRow& row);
  void finish();

 private:
  Format format_;
  std::FILE* out_;
  std::string time_reduce_;
  int ranks_;
  bool header_done_ = false;
  nlohmann::json rows_ = nlohmann::json::array();
};

nlohmann::json to_json(const BenchRow& row);

/// The two comment lines that open the --compare-auto table, for `ranks` ranks and the single
/// `backends` compared (in the order of ComparePoint::timings after auto).
std::string compare_header(const bench::CompareOptions& options, int ranks,
                           const std::vector<std::string>& backends);
/// One line of the --compare-auto table (with its newline); "yes"/"NO" from ComparePoint::met.
std::string compare_line(const bench::ComparePoint& point);
/// One --compare-auto JSON row.
nlohmann::json to_json(const bench::ComparePoint& point, const std::vector<std::string>& backends);

}  // namespace mcr::cli
