// Flags shared by `mcr bench` and `mcr tune`.
#include "bench_cli.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mcr/bench.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {

void add_sweep_flags(CLI::App* cmd, SweepFlags& f) {
  cmd->add_option("--op", f.ops,
                  "operations, comma separated, as in the API (all_reduce, ...) or 'all' (default: "
                  "bench all_reduce, or five ops with --compare-auto; tune every op)")
      ->delimiter(',');
  auto* begin = cmd->add_option("-b,--minbytes,--min-bytes", f.begin,
                                "first message size (bytes; K/M/G suffixes)")
                    ->capture_default_str();
  auto* end = cmd->add_option("-e,--maxbytes,--max-bytes", f.end,
                              "last message size (bytes; K/M/G suffixes)")
                  ->capture_default_str();
  auto* factor = cmd->add_option("-f,--stepfactor", f.factor, "size multiplier between steps")
                     ->capture_default_str();
  // Either list: -b/-e/-f given with --sizes were dropped without a word.
  cmd->add_option("--sizes", f.sizes, "explicit sizes, comma separated (instead of -b/-e/-f)")
      ->delimiter(',')
      ->excludes(begin)
      ->excludes(end)
      ->excludes(factor);
  cmd->add_option("--dtype", f.dtypes,
                  "element types, comma separated (fp32, fp64, fp16, bf16, i8, u8, i32, i64)")
      ->delimiter(',')
      ->capture_default_str();
}

void add_compare_flags(CLI::App* cmd, bench::CompareOptions& c) {
  cmd->add_option("--reps", c.repetitions,
                  "--compare-auto: least repetitions per point (median; more, up to 61, where ~0.6 "
                  "s allows)")
      ->capture_default_str();
  cmd->add_option("--min-ratio", c.min_ratio, "--compare-auto: ratio to report as met")
      ->capture_default_str();
  cmd->add_option("--precision", c.precision,
                  "--compare-auto: more rounds of auto and the best backend until the ratio's 95% "
                  "interval is within this fraction of it")
      ->capture_default_str();
  cmd->add_option("--extra-budget", c.extra_budget_s,
                  "--compare-auto: seconds per point those extra rounds may take (0: none)")
      ->capture_default_str();
}

std::vector<OpType> resolve_ops(const SweepFlags& f, const std::vector<OpType>& when_empty) {
  if (f.ops.empty()) return when_empty;
  std::vector<OpType> ops;
  for (const auto& name : f.ops) {
    if (name == "all") {
      for (OpType op : bench::benchmark_ops()) {
        if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
      }
      continue;
    }
    const OpType op = bench::parse_bench_op(name, "--op");
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  return ops;
}

std::size_t parse_size_flag(std::string_view flag, const std::string& text) {
  try {
    return parse_size(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", flag, e.what()));
  }
}

std::vector<std::size_t> resolve_sizes(const SweepFlags& f) {
  std::vector<std::size_t> sizes;
  if (!f.sizes.empty()) {
    for (const auto& s : f.sizes)
      sizes.push_back(parse_size_flag("--sizes", s));
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
  }
  return bench::geometric_sizes(parse_size_flag("-b/--minbytes", f.begin),
                                parse_size_flag("-e/--maxbytes", f.end), f.factor);
}

std::vector<DType> resolve_dtypes(const SweepFlags& f) {
  std::vector<DType> out;
  for (const auto& name : f.dtypes) {
    auto t = parse_dtype(name);
    if (!t) {
      throw InvalidArgument(fmt::format(
          "--dtype '{}': unknown element type (use fp32, fp64, fp16, bf16, i8, u8, i32, i64, as "
          "--help lists them)",
          name));
    }
    if (std::find(out.begin(), out.end(), *t) == out.end()) out.push_back(*t);
  }
  if (out.empty()) throw InvalidArgument("--dtype: at least one element type is required");
  return out;
}

}  // namespace mcr::cli
