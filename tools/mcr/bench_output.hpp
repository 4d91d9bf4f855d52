// Output of `mcr bench`: the sweep's rows (bench::SweepRow) as text (nccl-tests style), CSV and
// JSON, and the --compare-auto table and JSON rows (bench::ComparePoint).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcr/bench/compare.hpp"
#include "mcr/bench/sweep.hpp"
#include "mcr/comm/communicator.hpp"

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

/// --json FILE / --csv FILE: the rows go to memory, and the file is written by commit() once the
/// run is done, so a run that fails (a timeout, a backend error) leaves the file as it was instead
/// of empty or cut short.
class OutputFile {
 public:
  OutputFile() = default;
  /// Throws Error naming `flag` where the memory stream cannot be opened.
  OutputFile(std::string path, std::string flag);
  ~OutputFile();
  OutputFile(OutputFile&&) noexcept = default;
  // Assigning would drop the stream without closing it (the destructor does that).
  OutputFile& operator=(OutputFile&&) = delete;

  /// The stream rows are printed to; null where there is no file.
  std::FILE* get() const noexcept;
  /// Writes what was printed to the file; throws Error naming the flag and the file when that
  /// fails (a full disk), and does nothing where there is no file.
  void commit();

 private:
  struct Stream;
  std::unique_ptr<Stream> stream_;
};

/// --json FILE / --csv FILE (`flag` names which): whether rank 0 can write `path` is known on every
/// rank, so a bad path fails on all ranks alike instead of leaving the others waiting in a
/// collective; nothing is created or truncated yet. Empty path, or a rank other than 0: no file.
/// Collective.
OutputFile open_output(Communicator& world, const std::string& path, std::string_view flag);

/// Rank 0's output of a sweep: rows in `format` to `file` (or stdout when null); with a file, the
/// text table on stdout as well.
class SweepPrinting {
 public:
  SweepPrinting(Format format, const std::string& time_reduce, int ranks, std::FILE* file);
  /// Progress on stderr (unless quiet), skipped groups, and every row to the printers.
  bench::SweepCallbacks callbacks(bool quiet);
  /// Ends the tables (JSON is printed here) and reports wrong values.
  void finish(const bench::SweepResult& result);

 private:
  std::vector<RowPrinter> printers_;
};

/// Rank 0's output of --compare-auto: the table on stdout (unless JSON goes there), and with
/// `json` the rows as one document to `file` (or stdout when null).
class ComparePrinting {
 public:
  ComparePrinting(const bench::CompareOptions& options, int ranks,
                  std::vector<std::string> backends, bool json, std::FILE* file);
  /// Prints the table's header and returns the callbacks that print progress (unless quiet) and
  /// each point.
  bench::CompareCallbacks callbacks(bool quiet);
  /// The JSON document, the count of points that met the ratio, and wrong values.
  void finish(const bench::CompareResult& result);

 private:
  bench::CompareOptions options_;
  int ranks_;
  std::vector<std::string> backends_;
  bool json_;
  std::FILE* file_;
  bool text_;
  nlohmann::json rows_ = nlohmann::json::array();
};

}  // namespace mcr::cli
