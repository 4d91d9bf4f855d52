// Flags shared by `mcr bench` and `mcr tune` (ops, sizes, dtypes) and their resolution into the
// typed values of the mcr::bench options; the settings of `mcr bench --compare-auto`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "mcr/bench/compare.hpp"
#include "mcr/comm/types.hpp"

namespace CLI {
class App;
}

namespace mcr::cli {

struct SweepFlags {
  std::vector<std::string> ops;
  std::string begin;
  std::string end;
  double factor = 2.0;
  std::vector<std::string> sizes;  ///< explicit list; overrides -b/-e/-f
  std::vector<std::string> dtypes{"fp32"};
};

/// Adds --op, -b/--minbytes, -e/--maxbytes, -f/--stepfactor, --sizes and --dtype to `cmd`.
void add_sweep_flags(CLI::App* cmd, SweepFlags& flags);
/// Adds the --compare-auto settings --reps, --min-ratio, --precision and --extra-budget to `cmd`.
void add_compare_flags(CLI::App* cmd, bench::CompareOptions& options);
/// "all" (or no --op) = every benchmarkable op; otherwise the named ops in order, without repeats.
std::vector<OpType> resolve_ops(const SweepFlags& flags, const std::vector<OpType>& when_empty);
// A message size as parse_size() reads it ("64K"); its errors name `flag`.
std::size_t parse_size_flag(std::string_view flag, const std::string& text);
std::vector<std::size_t> resolve_sizes(const SweepFlags& flags);
std::vector<DType> resolve_dtypes(const SweepFlags& flags);

}  // namespace mcr::cli
