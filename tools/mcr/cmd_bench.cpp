// `mcr bench`: nccl-tests-style sweeps over ops, sizes, dtypes, backends and in/out-of-place, with
// verified data; `--compare-auto` times automatic selection against every backend in one run.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
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

struct BenchOptions {
  SweepFlags sweep{{}, "4", "1M", 2.0, {}, {"f32"}};
  std::vector<std::string> backends{"auto"};
  int iterations = 20;
  int warmup = 5;
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

std::vector<bool> resolve_places(const std::string& place) {
  if (place == "out") return {false};
  if (place == "in") return {true};
  if (place == "both") return {false, true};
  throw InvalidArgument(fmt::format("--place '{}': must be out, in or both", place));
}

ReduceOp resolve_reduce(const std::string& name) {
  auto op = parse_reduce_op(name);
  if (!op)
    throw InvalidArgument(
        fmt::format("--reduce '{}': unknown reduce operator (use sum, min, max)", name));
  return *op;
}

void check_backends(const Communicator& world, const std::vector<std::string>& requested) {
  const auto usable = world.backends();
  for (const auto& b : requested) {
    if (b == "auto") continue;
    if (std::find(usable.begin(), usable.end(), b) == usable.end()) {
      throw InvalidArgument(fmt::format("--backend '{}': not usable here (usable: auto, {})", b,
                                        fmt::join(usable, ", ")));
    }
  }
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// --json FILE / --csv FILE: rank 0 opens the file; every rank learns whether that worked, so a
// bad path fails on all ranks alike instead of leaving the others waiting in a collective.
File open_output(Communicator& world, const BenchOptions& o) {
  const std::string& path = o.json ? o.json_file : o.csv_file;
  File file(nullptr, &std::fclose);
  if (path.empty()) return file;
  if (world.rank() == 0) file.reset(std::fopen(path.c_str(), "w"));
  const bool failed = bench::sum_across(world, world.rank() == 0 && !file ? 1 : 0) > 0;
  if (failed) {
    throw InvalidArgument(
        fmt::format("{} '{}': the file cannot be written", o.json ? "--json" : "--csv", path));
  }
  return file;
}

void run_sweep(Communicator& world, const BenchOptions& o) {
  const auto ops = resolve_ops(o.sweep, {OpType::all_reduce});
  const auto sizes = resolve_sizes(o.sweep);
  const auto dtypes = resolve_dtypes(o.sweep);
  const auto places = resolve_places(o.place);
  const ReduceOp reduce = resolve_reduce(o.reduce);
  const auto how = bench::parse_time_reduce(o.time);
  if (o.iterations < 1)
    throw InvalidArgument(fmt::format("-n {}: at least one iteration is required", o.iterations));
  if (o.warmup < 0) throw InvalidArgument(fmt::format("-w {}: must be >= 0", o.warmup));
  check_backends(world, o.backends);
  const bool root_rank = world.rank() == 0;
  const Device device = bench::bench_device(o.device);
  File file = open_output(world, o);
  const Format format = o.json ? Format::json : o.csv ? Format::csv : Format::text;
  std::vector<RowPrinter> printers;
  if (file) {  // the machine-readable form to the file, the table to the terminal
    printers.emplace_back(format, o.time, world.size(), file.get());
    printers.emplace_back(Format::text, o.time, world.size());
  } else {
    printers.emplace_back(format, o.time, world.size());
  }
  std::uint64_t total_wrong = 0;
  for (OpType op : ops) {
    if (skip_single_rank_p2p(world, op)) continue;
    for (DType dtype : dtypes) {
      for (bool in_place : places) {
        if (in_place && !bench::has_in_place(op)) continue;
        for (const auto& requested : o.backends) {
          if (root_rank && !o.quiet) {
            fmt::print(stderr, "mcr bench: {} {} {} on {} ({} sizes)\n", to_string(op),
                       to_string(dtype), in_place ? "in-place" : "out-of-place", requested,
                       op == OpType::barrier ? 1 : sizes.size());
          }
          const std::string_view backend =
              requested == "auto" ? std::string_view() : std::string_view(requested);
          for (std::size_t size : bench::distinct_sizes(op, sizes, dtype, world.size())) {
            bench::Point point(
                world, {op, dtype, size, in_place, o.root, reduce, o.async, o.seed, device});
            const auto& l = point.layout();
            try {
              if (o.warmup > 0) point.time(backend, o.warmup);
            } catch (const UnsupportedError& e) {
              if (root_rank) fmt::print(stderr, "mcr bench: skipped: {}\n", e.what());
              break;
            }
            world.barrier();
            const double mine = point.time(backend, o.iterations);
            const double t = bench::reduce_across(world, {mine}, how)[0];
            const auto wrong = bench::sum_across(world, point.verify(backend));
            total_wrong += wrong;
            BenchRow row;
            row.op = op;
            row.dtype = dtype;
            row.bytes = l.bytes;
            row.count = l.chunk;
            row.root = bench::has_root(op) ? o.root : -1;
            row.in_place = in_place;
            row.async = o.async;
            row.requested = requested;
            row.backend = requested == "auto"
                              ? world
                                    .explain(op, dtype, l.bytes,
                                             is_reduction(op) ? reduce : ReduceOp::sum, device)
                                    .backend
                              : requested;
            row.iterations = o.iterations;
            row.time_us = t * 1e6;
            row.algbw_gbps = bench::algbw_gbps(l.bytes, t);
            row.busbw_gbps = bench::busbw_gbps(op, l.bytes, t, world.size());
            row.wrong = wrong;
            if (root_rank) {
              for (auto& p : printers)
                p.add(row);
            }
            if (op == OpType::barrier) break;  // no size
          }
        }
      }
    }
  }
  if (root_rank) {
    for (auto& p : printers)
      p.finish();
    if (total_wrong > 0) fmt::print(stderr, "mcr bench: {} wrong values\n", total_wrong);
  }
  if (total_wrong > 0) exit_code() = 1;
}

// The fastest single backend (lowest median) among res[1..]; 0 when none is supported.
std::size_t best_single(const std::vector<bench::BackendTiming>& res) {
  std::size_t best = 0;
  for (std::size_t v = 1; v < res.size(); ++v) {
    if (res[v].supported && (best == 0 || res[v].seconds < res[best].seconds)) best = v;
  }
  return best;
}

// Automatic selection against every single backend, interleaved in one process: the ratio is the
// best single backend's time over auto's (>= 1 means auto is at least as fast).
void run_compare(Communicator& world, const BenchOptions& o) {
  const auto ops =
      resolve_ops(o.sweep, {OpType::all_reduce, OpType::all_gather, OpType::reduce_scatter,
                            OpType::all_to_all, OpType::broadcast});
  const auto sizes = resolve_sizes(o.sweep);
  const auto dtypes = resolve_dtypes(o.sweep);
  const ReduceOp reduce = resolve_reduce(o.reduce);
  const bool root_rank = world.rank() == 0;
  if (o.repetitions < 1)
    throw InvalidArgument(
        fmt::format("--reps {}: at least one repetition is required", o.repetitions));
  if (!(o.precision >= 0))
    throw InvalidArgument(fmt::format("--precision {}: must be >= 0", o.precision));
  if (!(o.extra_budget_s >= 0))
    throw InvalidArgument(fmt::format("--extra-budget {}: must be >= 0 seconds", o.extra_budget_s));
  const Device device = bench::bench_device(o.device);
  File file = open_output(world, o);
  const bool text = !o.json || file;  // with --json FILE the table still goes to the terminal
  std::vector<std::string> variants{""};
  for (const auto& b : world.backends())
    variants.push_back(b);
  bench::InterleavedOptions io;
  io.repetitions = o.repetitions;
  io.warmup = std::max(o.warmup, 1);
  io.repetition_budget_s = 0.005;
  io.max_iterations = 100000;  // ~5 ms per repetition even for 0.1 us operations
  io.point_budget_s = 0.6;
  io.max_repetitions = 61;
  // Then only auto and the contenders for best, until the ratio is known to within
  // `o.precision` (95% confidence) or the extra budget is spent.
  io.extra_budget_s = o.extra_budget_s;
  io.extra_batch = 8;
  io.more_rounds = [precision = o.precision](const std::vector<bench::BackendTiming>& res) {
    const std::size_t best = best_single(res);
    if (best == 0) return std::vector<std::size_t>{};
    const auto ratio = bench::paired_ratio(res[best].repetitions, res[0].repetitions);
    if (ratio.relative_half_width() <= precision) return std::vector<std::size_t>{};
    std::vector<std::size_t> keep{0};
    for (std::size_t v = 1; v < res.size(); ++v) {  // near enough that it might still be best
      if (res[v].supported && res[v].seconds <= res[best].seconds * 1.1) keep.push_back(v);
    }
    return keep;
  };
  nlohmann::json rows = nlohmann::json::array();
  std::size_t points = 0, met = 0;
  std::uint64_t total_wrong = 0;
  if (root_rank && text) {
    fmt::print(
        "# auto vs every backend, {} ranks, {}-{} rounds interleaved, then auto and the best "
        "until the ratio is within {:.1f}% (95%) or {} s more; ratio = median over rounds of "
        "best/auto, times max-across-ranks\n",
        world.size(), io.repetitions, std::max(io.repetitions, io.max_repetitions),
        o.precision * 100, o.extra_budget_s);
    std::string head =
        fmt::format("# {:<15} {:>5} {:>10} {:<6} {:>10}", "op", "type", "size", "auto", "auto_us");
    for (std::size_t v = 1; v < variants.size(); ++v)
      head += fmt::format(" {:>10}", variants[v] + "_us");
    fmt::print("{} {:<6} {:>7} {:>15} {:>5} {:>6}\n", head, "best", "ratio", "ci95", "pairs",
               ">=" + fmt::format("{:.2f}", o.min_ratio));
  }
  for (OpType op : ops) {
    if (skip_single_rank_p2p(world, op)) continue;
    for (DType dtype : dtypes) {
      if (root_rank && !o.quiet)
        fmt::print(stderr, "mcr bench --compare-auto: {} {}\n", to_string(op), to_string(dtype));
      for (std::size_t size : bench::distinct_sizes(op, sizes, dtype, world.size())) {
        bench::Point point(world, {op, dtype, size, false, o.root, reduce, false, o.seed, device});
        const auto res = bench::measure_interleaved(point, variants, io);
        const auto bytes = point.layout().bytes;
        const auto chosen =
            world.explain(op, dtype, bytes, is_reduction(op) ? reduce : ReduceOp::sum, device)
                .backend;
        const std::size_t best = best_single(res);
        for (const auto& r : res)
          total_wrong += r.wrong;
        // Paired per round: the two runs of a round are adjacent in time, so load that drifts
        // between rounds cancels out of their ratio.
        const auto est = best == 0 ? bench::RatioEstimate{}
                                   : bench::paired_ratio(res[best].repetitions, res[0].repetitions);
        const double ratio = est.median;
        const std::string best_name = best == 0 ? std::string("-") : variants[best];
        const double best_s = best == 0 ? 0.0 : res[best].seconds;
        ++points;
        if (ratio >= o.min_ratio) ++met;
        if (!root_rank) continue;
        nlohmann::json j{{"op", std::string(to_string(op))},
                         {"dtype", std::string(to_string(dtype))},
                         {"bytes", bytes},
                         {"auto_backend", chosen},
                         {"auto_us", res[0].seconds * 1e6},
                         {"best_backend", best_name},
                         {"best_us", best_s * 1e6},
                         {"ratio", ratio},
                         {"ratio_ci95", {est.low, est.high}},
                         {"pairs", est.pairs}};
        std::string line = fmt::format("  {:<15} {:>5} {:>10} {:<6} {:>10.2f}", to_string(op),
                                       to_string(dtype), bytes, chosen, res[0].seconds * 1e6);
        for (std::size_t v = 1; v < res.size(); ++v) {
          j[variants[v] + "_us"] =
              res[v].supported ? nlohmann::json(res[v].seconds * 1e6) : nlohmann::json(nullptr);
          line += res[v].supported ? fmt::format(" {:>10.2f}", res[v].seconds * 1e6)
                                   : fmt::format(" {:>10}", "-");
        }
        rows.push_back(std::move(j));
        if (text) {
          fmt::print("{} {:<6} {:>7.3f} {:>15} {:>5} {:>6}\n", line, best_name, ratio,
                     fmt::format("[{:.3f},{:.3f}]", est.low, est.high), est.pairs,
                     ratio >= o.min_ratio ? "yes" : "NO");
          std::fflush(stdout);
        }
      }
    }
  }
  if (root_rank) {
    if (o.json) {
      const auto doc =
          nlohmann::json{{"ranks", world.size()}, {"min_ratio", o.min_ratio}, {"rows", rows}};
      fmt::print(file ? file.get() : stdout, "{}\n", doc.dump(2));
    }
    if (text) {
      fmt::print("# {} of {} points have auto >= {:.2f} x the best single backend\n", met, points,
                 o.min_ratio);
    }
  }
  if (total_wrong > 0) {
    if (root_rank) fmt::print(stderr, "mcr bench: {} wrong values\n", total_wrong);
    exit_code() = 1;
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  auto* cmd =
      app.add_subcommand("bench", "Benchmark collectives and p2p per backend (run under mpirun)");
  add_sweep_flags(cmd, opts->sweep);
  cmd->add_option("--backend", opts->backends,
                  "backends, comma separated: mpi, gloo, nccl, or auto (selection)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--iters", opts->iterations, "timed iterations per point")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", opts->warmup, "warmup iterations per point")
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
      opts->compare_auto ? run_compare(world, *opts) : run_sweep(world, *opts);
    } catch (...) {
      finalize();
      throw;
    }
    finalize();
  });
}

}  // namespace mcr::cli
