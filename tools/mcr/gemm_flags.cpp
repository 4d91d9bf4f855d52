// How `mcr gemm` times each GEMM: its flags, bound to the fields of the sampler's options.
#include "gemm_flags.hpp"

#include <CLI/CLI.hpp>

#include <string>

#include "bench_cli.hpp"
#include "number_checks.hpp"

namespace mcr::cli {

void add_measure_flags(CLI::App* cmd, codesign::bench::MeasureOptions& m) {
  cmd->add_option("--warmup", m.warmup_iterations, "untimed calls before sampling (at least)")
      ->capture_default_str()
      ->check(whole_at_least(0));
  cmd->add_option("--warmup-time", m.warmup_seconds, "seconds of warmup (at least)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--min-samples", m.min_samples,
                  "timed samples per GEMM (at least, unless --max-time ends them)")
      ->capture_default_str()
      ->check(whole_at_least(1));
  cmd->add_option("--max-samples", m.max_samples, "timed samples per GEMM (at most)")
      ->capture_default_str()
      ->check(whole_at_least(1));
  cmd->add_option("--min-time", m.min_seconds, "keep sampling until this many seconds were timed")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--max-time", m.max_seconds,
                  "stop sampling once this many seconds were timed, after one sample at least "
                  "(even below --min-samples)")
      ->capture_default_str()
      ->check(at_least(0));
  // A size as the other byte flags take it ("64M"); an unsigned option took "-1" as 2^64-1.
  cmd->add_option_function<std::string>(
      "--rotate-bytes",
      [&m](const std::string& text) { m.rotation_bytes = parse_size_flag("--rotate-bytes", text); },
      "bytes of rotated A/B/C copies, e.g. 64M (default 2x the last-level cache / L2)");
}

}  // namespace mcr::cli
