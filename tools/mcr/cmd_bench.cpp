// `mcr bench`: nccl-tests-style sweeps over ops, sizes, dtypes, backends and in/out-of-place, with
// verified data; `--compare-auto` times automatic selection against every backend in one run. The
// measuring is mcr::bench's (run_sweep, run_compare); this file maps flags to its options, and
// bench_output.cpp prints its results.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "bench_cli.hpp"
#include "bench_output.hpp"
#include "commands.hpp"
#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "refuse_flags.hpp"

namespace mcr::cli {
namespace {

// Flags that set a field of the library's options directly are bound to it (run, compare).
struct BenchFlags {
  SweepFlags sweep{{}, "4", "1M", 2.0, {}, {"fp32"}};
  bench::SweepOptions run;        // -n, -w, --min-time, --root, --async, --seed, --backend
  bench::CompareOptions compare;  // --reps, --min-ratio, --precision, --extra-budget
  std::string place = "out";
  std::string reduce = "sum";
  std::string time = "max";
  bool json = false;
  bool csv = false;
  std::string json_file;  ///< --json FILE: JSON there, the text table on stdout
  std::string csv_file;
  std::string device = "cpu";
  bool quiet = false;
  bool compare_auto = false;
};

// The device last: its check needs the hardware, and flag mistakes should be reported first.
bench::SweepOptions sweep_options(const BenchFlags& f) {
  bench::SweepOptions o = f.run;
  o.ops = resolve_ops(f.sweep, {OpType::all_reduce});
  o.sizes = resolve_sizes(f.sweep);
  o.dtypes = resolve_dtypes(f.sweep);
  o.place = bench::parse_placement(f.place);
  o.reduce = bench::parse_reduce(f.reduce);
  o.time = bench::parse_time_reduce(f.time);
  return o;
}

OutputFile output_file(Communicator& world, const BenchFlags& f) {
  return open_output(world, f.json ? f.json_file : f.csv_file, f.json ? "--json" : "--csv");
}

// The device is looked for on each rank (one node may have no GPU); whether every rank found its
// own is agreed before anything else, so that one rank's refusal is every rank's (alone, it left
// the others waiting in the first collective).
Device bench_device_everywhere(Communicator& world, std::string_view kind) {
  Device device;
  std::string why;
  try {
    device = bench::bench_device(kind);
  } catch (const InvalidArgument& e) {
    why = e.what();
  }
  const std::uint64_t failed = bench::sum_across(world, why.empty() ? 0 : 1);
  if (failed == 0) return device;
  if (!why.empty()) throw InvalidArgument(fmt::format("{} (rank {})", why, world.rank()));
  throw InvalidArgument(fmt::format("--device {}: {} of the {} ranks found no device to use", kind,
                                    failed, world.size()));
}

void bench_sweep(Communicator& world, const BenchFlags& f) {
  bench::SweepOptions o = sweep_options(f);
  bench::check_sweep_options(o, world.backends(), world.size());
  o.device = bench_device_everywhere(world, f.device);
  OutputFile file = output_file(world, f);
  const Format format = f.json ? Format::json : f.csv ? Format::csv : Format::text;
  SweepPrinting printing(format, f.time, world.size(), file.get());
  const auto cb = world.rank() == 0 ? printing.callbacks(f.quiet) : bench::SweepCallbacks{};
  const bench::SweepResult result = bench::run_sweep(world, o, cb);
  if (world.rank() == 0) printing.finish(result);
  file.commit();
  if (result.wrong > 0) exit_code() = 1;
}

bench::CompareOptions compare_options(const BenchFlags& f) {
  bench::CompareOptions o = f.compare;
  o.ops = resolve_ops(f.sweep, o.ops);
  o.sizes = resolve_sizes(f.sweep);
  o.dtypes = resolve_dtypes(f.sweep);
  o.reduce = bench::parse_reduce(f.reduce);
  o.warmup = f.run.warmup;
  o.root = f.run.root;
  o.seed = f.run.seed;
  o.async = f.run.async;
  const bench::Placement place = bench::parse_placement(f.place);
  if (place == bench::Placement::both) {
    throw InvalidArgument(
        "--place both: --compare-auto times one form of each point; give --place in or out");
  }
  o.in_place = place == bench::Placement::in;
  return o;
}

// Options of the sweep that --compare-auto has no use for: it times automatic selection against
// every backend of the job, interleaved, for as many rounds as --reps and --precision ask, and
// reports the slowest rank. Refused before anything starts rather than ignored.
void refuse_for_compare(const CLI::App& cmd) {
  refuse_flags(cmd, {"--backend", "--iters", "--min-time", "--time", "--csv"},
               "does not apply to --compare-auto, which times automatic selection against every "
               "backend of the job, interleaved, for the rounds --reps and --precision ask, on "
               "the slowest rank (--json gives its rows)");
}

// The flags only --compare-auto reads, refused in a plain sweep rather than ignored.
void refuse_for_sweep(const CLI::App& cmd) {
  refuse_flags(cmd, {"--reps", "--min-ratio", "--precision", "--extra-budget"},
               "applies to --compare-auto only (a sweep times each point over --iters and "
               "--min-time; add --compare-auto to compare)");
}

// Automatic selection against every single backend, interleaved in one process: the ratio is the
// best single backend's time over auto's (>= 1 means auto is at least as fast).
void bench_compare(Communicator& world, const BenchFlags& f) {
  bench::CompareOptions o = compare_options(f);
  bench::check_compare_options(o, world.size());
  o.device = bench_device_everywhere(world, f.device);
  OutputFile file = output_file(world, f);
  ComparePrinting printing(o, world.size(), world.backends(), f.json, file.get());
  const auto cb = world.rank() == 0 ? printing.callbacks(f.quiet) : bench::CompareCallbacks{};
  const bench::CompareResult result = bench::run_compare(world, o, cb);
  if (world.rank() == 0) printing.finish(result);
  file.commit();
  if (result.wrong > 0) exit_code() = 1;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opts = std::make_shared<BenchFlags>();
  auto* cmd =
      app.add_subcommand("bench", "Benchmark collectives and p2p per backend (run under mpirun)");
  add_sweep_flags(cmd, opts->sweep);
  cmd->add_option("--backend", opts->run.backends,
                  "backends, comma separated: mpi, gloo, nccl, or auto (selection)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("-n,--iters", opts->run.iterations, "least timed iterations per point")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", opts->run.warmup, "warmup iterations per point")
      ->capture_default_str();
  cmd->add_option("--min-time", opts->run.min_time_s,
                  "least timed seconds per point: more than -n iterations where they are short "
                  "(0: exactly -n)")
      ->capture_default_str();
  cmd->add_option("--place", opts->place, "out (out-of-place), in (in-place) or both")
      ->capture_default_str();
  cmd->add_option("--root", opts->run.root, "root rank of broadcast, reduce, gather, scatter")
      ->capture_default_str();
  cmd->add_option("--reduce", opts->reduce, "reduce operator: sum, min or max")
      ->capture_default_str();
  cmd->add_option("--time", opts->time, "time reported across ranks: max, min or avg")
      ->capture_default_str();
  cmd->add_flag("--async", opts->run.async,
                "use the asynchronous forms; all handles are waited inside the timing");
  cmd->add_option("--seed", opts->run.seed, "seed of the verifiable data")->capture_default_str();
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
  add_compare_flags(cmd, opts->compare);
  cmd->callback([cmd, opts, json, csv] {
    opts->json = json->count() > 0;
    opts->csv = csv->count() > 0;
    if (opts->compare_auto) {
      refuse_for_compare(*cmd);
      (void)compare_options(*opts);  // its flag errors too, before any rank starts
    } else {
      refuse_for_sweep(*cmd);
      (void)sweep_options(*opts);  // likewise: a malformed size was reported after init()
    }
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
