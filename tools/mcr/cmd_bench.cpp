// `mcr bench`: nccl-tests-style sweeps over ops, sizes, dtypes, backends and in/out-of-place, with
// verified data; `--compare-auto` times automatic selection against every backend in one run. The
// measuring is mcr::bench's (run_sweep, run_compare); this file maps flags to its options and
// prints its results.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "bench_cli.hpp"
#include "bench_output.hpp"
#include "commands.hpp"
#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/errors.hpp"

namespace mcr::cli {
namespace {

struct BenchFlags {
  SweepFlags sweep{{}, "4", "1M", 2.0, {}, {"f32"}};
  std::vector<std::string> backends{"auto"};
  int iterations = 20;
  int warmup = 5;
  double min_time_s = 0.01;
  std::string place = "out";
  int root = 0;
  std::string reduce = "sum";
  std::string time = "max";
  bool async = false;
  std::uint64_t seed = 1;
  bool json = false;
  bool csv = false;
  std::string json_file;  ///< --json FILE: JSON there, the text table on stdout
  std::string csv_file;
  std::string device = "cpu";
  bool quiet = false;
  bool compare_auto = false;
  int repetitions = 9;
  double min_ratio = 0.95;
  double precision = 0.015;
  double extra_budget_s = 4.0;
};

ReduceOp resolve_reduce(const std::string& name) {
  auto op = parse_reduce_op(name);
  if (!op)
    throw InvalidArgument(
        fmt::format("--reduce '{}': unknown reduce operator (use sum, min, max)", name));
  return *op;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// --json FILE / --csv FILE: rank 0 opens the file; every rank learns whether that worked, so a
// bad path fails on all ranks alike instead of leaving the others waiting in a collective.
File open_output(Communicator& world, const BenchFlags& f) {
  const std::string& path = f.json ? f.json_file : f.csv_file;
  File file(nullptr, &std::fclose);
  if (path.empty()) return file;
  if (world.rank() == 0) file.reset(std::fopen(path.c_str(), "w"));
  const bool failed = bench::sum_across(world, world.rank() == 0 && !file ? 1 : 0) > 0;
  if (failed) {
    throw InvalidArgument(
        fmt::format("{} '{}': the file cannot be written", f.json ? "--json" : "--csv", path));
  }
  return file;
}

// The device last: its check needs the hardware, and flag mistakes should be reported first.
bench::SweepOptions sweep_options(const BenchFlags& f) {
  bench::SweepOptions o;
  o.ops = resolve_ops(f.sweep, {OpType::all_reduce});
  o.sizes = resolve_sizes(f.sweep);
  o.dtypes = resolve_dtypes(f.sweep);
  o.place = bench::parse_placement(f.place);
  o.reduce = resolve_reduce(f.reduce);
  o.time = bench::parse_time_reduce(f.time);
  o.backends = f.backends;
  o.iterations = f.iterations;
  o.warmup = f.warmup;
  o.min_time_s = f.min_time_s;
  o.root = f.root;
  o.async = f.async;
  o.seed = f.seed;
  return o;
}

void bench_sweep(Communicator& world, const BenchFlags& f) {
  bench::SweepOptions o = sweep_options(f);
  bench::check_sweep_options(o, world.backends());
  o.device = bench::bench_device(f.device);
  const bool root_rank = world.rank() == 0;
  File file = open_output(world, f);
  const Format format = f.json ? Format::json : f.csv ? Format::csv : Format::text;
  std::vector<RowPrinter> printers;
  if (file) {  // the machine-readable form to the file, the table to the terminal
    printers.emplace_back(format, f.time, world.size(), file.get());
    printers.emplace_back(Format::text, f.time, world.size());
  } else {
    printers.emplace_back(format, f.time, world.size());
  }
  bench::SweepCallbacks cb;
  if (root_rank) {
    if (!f.quiet) {
      cb.on_group = [](const bench::SweepGroup& g) {
        fmt::print(stderr, "mcr bench: {} {} {} on {} ({} sizes)\n", to_string(g.op),
                   to_string(g.dtype), g.in_place ? "in-place" : "out-of-place", g.requested,
                   g.sizes);
      };
    }
    cb.on_skipped = [](const bench::SweepGroup&, std::string_view reason) {
      fmt::print(stderr, "mcr bench: skipped: {}\n", reason);
    };
    cb.on_row = [&printers](const bench::SweepRow& row) {
      for (auto& p : printers)
        p.add(row);
    };
  }
  const bench::SweepResult result = bench::run_sweep(world, o, cb);
  if (root_rank) {
    for (auto& p : printers)
      p.finish();
    if (result.wrong > 0) fmt::print(stderr, "mcr bench: {} wrong values\n", result.wrong);
  }
  if (result.wrong > 0) exit_code() = 1;
}

bench::CompareOptions compare_options(const BenchFlags& f) {
  bench::CompareOptions o;
  o.ops = resolve_ops(f.sweep, o.ops);
  o.sizes = resolve_sizes(f.sweep);
  o.dtypes = resolve_dtypes(f.sweep);
  o.reduce = resolve_reduce(f.reduce);
  o.warmup = f.warmup;
  o.root = f.root;
  o.seed = f.seed;
  o.repetitions = f.repetitions;
  o.min_ratio = f.min_ratio;
  o.precision = f.precision;
  o.extra_budget_s = f.extra_budget_s;
  return o;
}

// Automatic selection against every single backend, interleaved in one process: the ratio is the
// best single backend's time over auto's (>= 1 means auto is at least as fast).
void bench_compare(Communicator& world, const BenchFlags& f) {
  bench::CompareOptions o = compare_options(f);
  bench::check_compare_options(o);
  o.device = bench::bench_device(f.device);
  const bool root_rank = world.rank() == 0;
  File file = open_output(world, f);
  const bool text = !f.json || file;  // with --json FILE the table still goes to the terminal
  const std::vector<std::string> backends = world.backends();
  if (root_rank && text) fmt::print("{}", compare_header(o, world.size(), backends));
  nlohmann::json rows = nlohmann::json::array();
  bench::CompareCallbacks cb;
  if (root_rank) {
    if (!f.quiet) {
      cb.on_group = [](OpType op, DType dtype) {
        fmt::print(stderr, "mcr bench --compare-auto: {} {}\n", to_string(op), to_string(dtype));
      };
    }
    cb.on_point = [&](const bench::ComparePoint& p) {
      rows.push_back(to_json(p, backends));
      if (text) {
        fmt::print("{}", compare_line(p));
        std::fflush(stdout);
      }
    };
  }
  const bench::CompareResult result = bench::run_compare(world, o, cb);
  if (root_rank) {
    if (f.json) {
      const auto doc =
          nlohmann::json{{"ranks", world.size()}, {"min_ratio", o.min_ratio}, {"rows", rows}};
      fmt::print(file ? file.get() : stdout, "{}\n", doc.dump(2));
    }
    if (text) {
      fmt::print("# {} of {} points have auto >= {:.2f} x the best single backend\n", result.met,
                 result.points.size(), o.min_ratio);
    }
  }
  if (result.wrong > 0) {
    if (root_rank) fmt::print(stderr, "mcr bench: {} wrong values\n", result.wrong);
    exit_code() = 1;
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opts = std::make_shared<BenchFlags>();
  auto* cmd =
      app.add_subcommand("bench", "Benchmark collectives and p2p per backend (run under mpirun)");
  add_sweep_flags(cmd, opts->sweep);
  cmd->add_option("--backend", opts->backends,
                  "backends, comma separated: mpi, gloo, nccl, or auto (selection)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--iters", opts->iterations, "least timed iterations per point")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", opts->warmup, "warmup iterations per point")
      ->capture_default_str();
  cmd->add_option("--min-time", opts->min_time_s,
                  "least timed seconds per point: more than -n iterations where they are short "
                  "(0: exactly -n)")
      ->capture_default_str();
  cmd->add_option("--place", opts->place, "out (out-of-place), in (in-place) or both")
      ->capture_default_str();
  cmd->add_option("--root", opts->root, "root rank of broadcast, reduce, gather, scatter")
      ->capture_default_str();
  cmd->add_option("--reduce", opts->reduce, "reduce operator: sum, min or max")
      ->capture_default_str();
  cmd->add_option("--time", opts->time, "time reported across ranks: max, min or avg")
      ->capture_default_str();
  cmd->add_flag("--async", opts->async,
                "use the asynchronous forms; all handles are waited inside the timing");
  cmd->add_option("--seed", opts->seed, "seed of the verifiable data")->capture_default_str();
  auto* json =
      cmd->add_option("--json", opts->json_file, "print JSON (rank 0), or write it to FILE")
          ->expected(0, 1);
  auto* csv = cmd->add_option("--csv", opts->csv_file, "print CSV (rank 0), or write it to FILE")
                  ->expected(0, 1)
                  ->excludes(json);
  cmd->add_option("--device", opts->device, "buffers in cpu or cuda memory (cuda: this rank's GPU)")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress lines on stderr");
  cmd->add_flag(
      "--compare-auto", opts->compare_auto,
      "time auto and every backend interleaved at each point and print auto's throughput ratio");
  cmd->add_option("--reps", opts->repetitions,
                  "--compare-auto: least repetitions per point (median; more, up to 61, where ~0.6 "
                  "s allows)")
      ->capture_default_str();
  cmd->add_option("--min-ratio", opts->min_ratio, "--compare-auto: ratio to report as met")
      ->capture_default_str();
  cmd->add_option("--precision", opts->precision,
                  "--compare-auto: more rounds of auto and the best backend until the ratio's 95% "
                  "interval is within this fraction of it")
      ->capture_default_str();
  cmd->add_option("--extra-budget", opts->extra_budget_s,
                  "--compare-auto: seconds per point those extra rounds may take (0: none)")
      ->capture_default_str();
  cmd->callback([opts, json, csv] {
    opts->json = json->count() > 0;
    opts->csv = csv->count() > 0;
    Communicator world = init();
    try {
      opts->compare_auto ? bench_compare(world, *opts) : bench_sweep(world, *opts);
    } catch (...) {
      finalize();
      throw;
    }
    finalize();
  });
}

}  // namespace mcr::cli
