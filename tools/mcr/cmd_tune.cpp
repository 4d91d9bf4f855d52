// `mcr tune`: measures every usable backend for each op and size, writes a tuning table (winner per
// size with hysteresis, adjacent sizes merged, raw latencies kept), validates and plots tables.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include "bench_cli.hpp"
#include "bench_plot.hpp"
#include "commands.hpp"
#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"
#include "mcr/info.hpp"
#include "mcr/selection.hpp"

namespace mcr::cli {
namespace {

struct TuneOptions {
  SweepFlags sweep{{}, "4", "64M", 2.0, {}, {"f32"}};
  std::string output = "mcr_tuning.json";
  std::vector<std::string> backends;
  double hysteresis = 0.03;
  int repetitions = 5;
  double budget_ms = 10.0;
  std::string validate;
  bool plot = false;
  std::string plot_format = "png";
  bool quiet = false;
};

int validate_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgument(fmt::format("--validate '{}': the file cannot be opened", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const auto problems = bench::validate_table_text(ss.str());
  if (problems.empty()) {
    const auto t = TuningTable::parse_json(ss.str());
    std::size_t ranges = 0;
    for (const auto& e : t.entries)
      ranges += e.ranges.size();
    fmt::print("{}: valid tuning table (version {}, {} entries, {} ranges, {} samples)\n", path,
               t.version, t.entries.size(), ranges, t.samples.size());
    return 0;
  }
  fmt::print("{}: {} problem{}\n", path, problems.size(), problems.size() == 1 ? "" : "s");
  for (const auto& p : problems)
    fmt::print("  {}\n", p);
  return 1;
}

void print_entries(const TuningTable& t) {
  fmt::print("{:<15} {:<6} {:>5}  ranges (bytes: backend)\n", "op", "dtype", "ranks");
  for (const auto& e : t.entries) {
    std::string ranges;
    for (const auto& r : e.ranges) {
      ranges += fmt::format(
          "{}[{}, {}]: {}", ranges.empty() ? "" : "  ", r.min_bytes,
          r.max_bytes == kMaxBytes ? std::string("inf") : std::to_string(r.max_bytes), r.backend);
    }
    fmt::print("{:<15} {:<6} {:>5}  {}\n", to_string(e.op), e.dtype_class, e.group_size, ranges);
  }
}

void run_tune(Communicator& world, const TuneOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const auto ops = resolve_ops(o.sweep, bench::benchmark_ops());
  const auto sizes = resolve_sizes(o.sweep);
  const auto dtypes = resolve_dtypes(o.sweep);
  std::vector<std::string> backends = o.backends.empty() ? world.backends() : o.backends;
  const auto usable = world.backends();
  for (const auto& b : backends) {
    if (std::find(usable.begin(), usable.end(), b) == usable.end()) {
      throw InvalidArgument(
          fmt::format("--backends '{}': not usable here (usable: {})", b, fmt::join(usable, ", ")));
    }
  }
  if (o.repetitions < 1)
    throw InvalidArgument(fmt::format("--reps {}: must be >= 1", o.repetitions));
  const bool root = world.rank() == 0;
  bench::InterleavedOptions io;
  io.repetitions = o.repetitions;
  io.repetition_budget_s = o.budget_ms * 1e-3;
  io.max_iterations = 1000;

  TuningTable table;
  table.provenance = bench::provenance(world, command_line());
  table.provenance["hysteresis"] = fmt::format("{}", o.hysteresis);
  table.provenance["method"] = fmt::format(
      "median over {} interleaved repetitions of the max-across-ranks mean time per iteration; "
      "~{} ms per repetition",
      o.repetitions, o.budget_ms);
  std::size_t total = 0;
  for (OpType op : ops) {
    if (skip_single_rank_p2p(world, op)) continue;
    total += (is_reduction(op) ? dtypes.size() : 1) *
             bench::distinct_sizes(op, sizes, dtypes.front(), world.size()).size();
  }
  std::size_t done = 0;
  std::uint64_t wrong = 0;
  for (OpType op : ops) {
    if (skip_single_rank_p2p(world, op)) continue;
    // Data movement does not depend on the element type: one "any" entry. Reductions per class.
    std::vector<DType> types = is_reduction(op) ? dtypes : std::vector<DType>{dtypes.front()};
    for (DType dtype : types) {
      const std::string klass = is_reduction(op) ? std::string(dtype_class(dtype)) : "any";
      for (std::size_t size : bench::distinct_sizes(op, sizes, dtype, world.size())) {
        bench::Point point(world, {op, dtype, size, false, 0, ReduceOp::sum, false, 1});
        const auto res = bench::measure_interleaved(point, backends, io);
        ++done;
        std::string line;
        for (const auto& r : res) {
          if (!r.supported) continue;
          if (r.wrong > 0) {
            wrong += r.wrong;
            if (root)
              fmt::print(stderr, "mcr tune: {} on {} at {} bytes: {} wrong values; not used\n",
                         to_string(op), r.backend, point.layout().bytes, r.wrong);
            continue;
          }
          table.samples.push_back(TuningSample{op, klass, world.size(), point.layout().bytes,
                                               r.backend, r.seconds * 1e6});
          line += fmt::format(" {}={:.2f}us", r.backend, r.seconds * 1e6);
        }
        if (root && !o.quiet) {
          const double el =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print(stderr, "[{:>4}/{}] {:>6.1f}s {:<15} {:<5} {:>10} B:{}\n", done, total, el,
                     to_string(op), klass, point.layout().bytes, line);
        }
        if (op == OpType::barrier) break;
      }
    }
  }
  table.entries = bench::build_entries(table.samples, o.hysteresis);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  table.provenance["wall_seconds"] = fmt::format("{:.1f}", wall);
  if (root) {
    table.save(o.output);
    const auto problems = table.validate(backend_names());
    print_entries(table);
    fmt::print("mcr tune: wrote {} ({} entries, {} samples) in {:.1f} s{}\n", o.output,
               table.entries.size(), table.samples.size(), wall,
               problems.empty() ? "" : "; INVALID:");
    for (const auto& p : problems)
      fmt::print("  {}\n", p);
    if (o.plot) {
      const auto prefix = o.output.size() > 5 && o.output.ends_with(".json")
                              ? o.output.substr(0, o.output.size() - 5)
                              : o.output;
      try {
        for (const auto& img : plot_table(table, prefix, o.plot_format))
          fmt::print("mcr tune: plot {}\n", img);
      } catch (const Error& e) {
        fmt::print(stderr, "mcr tune: {}\n", e.what());
      }
    }
  }
  if (wrong > 0) exit_code() = 1;
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto opts = std::make_shared<TuneOptions>();
  auto* cmd = app.add_subcommand(
      "tune", "Measure every backend per op and size and write a tuning table (run under mpirun)");
  add_sweep_flags(cmd, opts->sweep);
  cmd->add_option("-o,--output", opts->output, "tuning table to write")->capture_default_str();
  cmd->add_option("--backends", opts->backends, "backends to compare (default: every usable one)")
      ->delimiter(',');
  cmd->add_option("--hysteresis", opts->hysteresis,
                  "another backend must be faster by more than this fraction to take over from the "
                  "neighbouring smaller size's winner")
      ->capture_default_str();
  cmd->add_option("--reps", opts->repetitions, "interleaved repetitions per point (median)")
      ->capture_default_str();
  cmd->add_option("--budget-ms", opts->budget_ms,
                  "target time of one repetition (sets iteration counts)")
      ->capture_default_str();
  cmd->add_option("--validate", opts->validate,
                  "check a table file (gaps, overlaps, unknown ops/backends) and exit");
  cmd->add_flag("--plot", opts->plot,
                "render latency vs size per op with gnuplot next to the table");
  cmd->add_option("--plot-format", opts->plot_format, "png or svg")->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress lines on stderr");
  cmd->callback([opts] {
    if (!opts->validate.empty()) {
      exit_code() = validate_file(opts->validate);
      return;
    }
    Communicator world = init();
    try {
      run_tune(world, *opts);
    } catch (...) {
      finalize();
      throw;
    }
    finalize();
  });
}

}  // namespace mcr::cli
