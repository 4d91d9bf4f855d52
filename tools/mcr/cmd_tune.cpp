// `mcr tune`: measures every usable backend for each op and size, writes a tuning table (winner per
// size with hysteresis, adjacent sizes merged, raw latencies kept), validates and plots tables. The
// measuring and the table are mcr::bench's (run_tune); this file maps flags, prints and writes.
#include <filesystem>
#include <initializer_list>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "bench_cli.hpp"
#include "bench_plot.hpp"
#include "commands.hpp"
#include "mcr/bench.hpp"
#include "mcr/comm.hpp"
#include "mcr/comm/info.hpp"
#include "mcr/comm/selection.hpp"
#include "mcr/errors.hpp"
#include "output_path.hpp"
#include "refuse_flags.hpp"
#include "tune_print.hpp"

namespace mcr::cli {
namespace {

struct TuneFlags {
  SweepFlags sweep{{}, "4", "64M", 2.0, {}, {"fp32"}};
  std::string output = "mcr_tuning.json";
  std::vector<std::string> backends;
  double hysteresis = 0.03;
  int repetitions = 5;
  double budget_ms = 10.0;
  std::string place = "out";
  bool async = false;
  std::string form;  // empty: sync, or async with --async
  std::vector<int> in_flight{1};
  bool no_hier_steps = false;
  std::string subgroup_ops = "hier";
  std::string validate;
  std::string refine;                    // a table to refine with run traces
  std::vector<std::string> from_traces;  // MCR_LOG traces of the program's runs
  std::size_t min_ops = 10;
  bool plot = false;
  std::string plot_format = "png";
  bool quiet = false;
};

// --async is --form async; the rest is the library's (parse_call_forms).
std::vector<CallForm> parse_forms(const TuneFlags& f) {
  if (f.async && !f.form.empty() && f.form != "async") {
    throw InvalidArgument(fmt::format(
        "--async with --form '{}': --async means --form async; give one of them", f.form));
  }
  return bench::parse_call_forms(f.form.empty() ? (f.async ? "async" : "sync") : f.form);
}

bench::TuneOptions tune_options(const TuneFlags& f) {
  bench::TuneOptions o;
  o.ops = resolve_ops(f.sweep, o.ops);
  o.sizes = resolve_sizes(f.sweep);
  o.dtypes = resolve_dtypes(f.sweep);
  o.backends = f.backends;
  o.hysteresis = f.hysteresis;
  o.repetitions = f.repetitions;
  o.budget_ms = f.budget_ms;
  o.in_place = bench::parse_tune_placement(f.place);
  o.forms = parse_forms(f);
  o.in_flight = f.in_flight;
  o.hier_steps = !f.no_hier_steps;
  if (f.subgroup_ops != "hier" && f.subgroup_ops != "all") {
    throw InvalidArgument(fmt::format("--subgroup-ops '{}': must be hier or all", f.subgroup_ops));
  }
  o.subgroup_all_ops = f.subgroup_ops == "all";
  if (o.subgroup_all_ops && f.no_hier_steps) {
    throw InvalidArgument(
        "--subgroup-ops all measures the groups that --no-hier-steps skips: give one of them");
  }
  o.command = bench::command_line();
  return o;
}

void tune(Communicator& world, const TuneFlags& f) {
  const bench::TuneOptions o = tune_options(f);
  const bool root = world.rank() == 0;
  // Rank 0 writes the table, after minutes of measuring: whether it can is known first, on every
  // rank alike (the file is left as it was).
  std::string why;
  const bool can_write = !root || replaceable(f.output, "-o", &why);
  if (bench::sum_across(world, can_write ? 0 : 1) > 0) {
    throw InvalidArgument(
        root ? why : fmt::format("-o '{}': rank 0 cannot write the table there", f.output));
  }
  bench::TuneCallbacks cb;
  if (root)
    cb.on_point = [quiet = f.quiet](const bench::TunePoint& p) { print_tune_point(p, quiet); };
  const bench::TuneResult result = bench::run_tune(world, o, cb);
  const TuningTable& table = result.table;
  if (root) {
    // The checks a table is loaded with (structure, then gaps and overlaps): validate() alone
    // passed a table that init then refused (no entries: send alone on one rank). Such a table
    // is not written: it would replace a good one that MCR_TUNING may point at.
    const auto problems = TuningTable::problems(table.to_json());
    if (problems.empty()) table.save(f.output);
    print_entries(table);
    if (problems.empty()) {
      fmt::print("mcr tune: wrote {} ({} entries, {} samples) in {:.1f} s\n", f.output,
                 table.entries.size(), table.samples.size(), result.wall_seconds);
    } else {
      fmt::print(
          "mcr tune: {} entries, {} samples in {:.1f} s; {} not written (left as it was), "
          "the table is INVALID:\n",
          table.entries.size(), table.samples.size(), result.wall_seconds, f.output);
      for (const auto& p : problems)
        fmt::print("  {}\n", p);
      exit_code() = 1;  // a table selection would refuse to load
    }
    if (f.plot && problems.empty()) plot_next_to(table, f.output, f.plot_format);
  }
  if (result.wrong > 0) exit_code() = 1;
}

// The plot's format, before anything starts: the plot is drawn after minutes of measuring. Also
// without --plot, where a mistyped format would otherwise pass unseen.
void check_plot_option(const TuneFlags& f) {
  check_plot_format(f.plot_format);
}

// The flags of a measuring run: --refine and --validate read none of them.
constexpr std::initializer_list<const char*> kMeasuringFlags = {
    "--op",    "--minbytes", "--maxbytes",      "--stepfactor",   "--sizes",
    "--dtype", "--backends", "--reps",          "--budget-ms",    "--place",
    "--form",  "--async",    "--no-hier-steps", "--subgroup-ops", "--in-flight"};

// --refine: no ranks, no MPI; reads the table and the traces, writes the refined table.
void refine(const TuneFlags& f, const CLI::App& cmd) {
  if (f.from_traces.empty()) {
    throw InvalidArgument(
        "--refine needs --from-trace: the MCR_LOG trace (MCR_LOG=trace) of at least one run");
  }
  std::error_code ec;
  if (cmd.count("--output") == 0 || f.output == f.refine ||
      std::filesystem::equivalent(f.output, f.refine, ec)) {
    throw InvalidArgument(fmt::format(
        "--refine '{}' needs -o with another file: the refined table does not overwrite the "
        "table it comes from",
        f.refine));
  }
  const bool given = cmd.count("--hysteresis") > 0;
  if (given && !(f.hysteresis >= 0 && f.hysteresis < 1)) {
    throw InvalidArgument(fmt::format("--hysteresis {}: must be in [0, 1)", f.hysteresis));
  }
  bench::RefineOptions o;
  o.hysteresis = given ? f.hysteresis : -1;  // not given: the table's own
  o.min_ops = f.min_ops;
  o.command = bench::command_line();
  check_plot_option(f);
  if (std::string why; !replaceable(f.output, "-o", &why)) throw InvalidArgument(why);
  std::vector<bench::Trace> traces;
  for (const auto& path : f.from_traces)
    traces.push_back(bench::load_trace(path));
  const auto result = bench::refine_table(TuningTable::load(f.refine), traces, o);
  print_refined_points(result.points);
  print_shifted_sizes(result.shifted);
  const auto problems = result.table.validate(backend_names());
  if (!problems.empty()) {  // build_entries() makes valid entries; this is a bug if it happens
    throw Error(fmt::format("--refine: the refined table is invalid ({}); nothing written",
                            problems.front()));
  }
  result.table.save(f.output);
  print_entries(result.table);
  fmt::print("mcr tune: wrote {} ({} entries refined)\n", f.output, result.entries_refined);
  if (f.plot) plot_next_to(result.table, f.output, f.plot_format);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto opts = std::make_shared<TuneFlags>();
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
  cmd->add_option("--place", opts->place,
                  "out (out-of-place) or in (in-place form of every op that has one, as a "
                  "training step reduces its gradients)")
      ->capture_default_str();
  cmd->add_option("--form", opts->form,
                  "call form(s) to time: sync, async (i* calls waited for inside the timing, as "
                  "mcr.torch and bucketed gradient reductions issue them) or both; each gives "
                  "entries of its own form [default: sync]");
  cmd->add_flag("--async", opts->async, "the same as --form async");
  cmd->add_flag("--no-hier-steps", opts->no_hier_steps,
                "on several hosts, do not also measure the groups hier runs its steps on (the "
                "ranks of a host; one rank per host)");
  cmd->add_option("--subgroup-ops", opts->subgroup_ops,
                  "on several hosts, the ops measured on those groups: hier (the ops hier runs "
                  "there) or all (every tuned op as well, for programs that form such groups "
                  "themselves, e.g. DeepSpeed's expert groups)")
      ->capture_default_str();
  cmd->add_option(
         "--in-flight", opts->in_flight,
         "async form: operations kept in flight (issued, waited for, then the next); several "
         "(4,16): each size timed at each, and it goes to the backend that loses least "
         "where it is not the fastest")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--validate", opts->validate,
                  "check a table file (gaps, overlaps, unknown ops/backends) and exit");
  cmd->add_option("--refine", opts->refine,
                  "rebuild this table's entries where the --from-trace runs show several backends "
                  "running an operation at one size, with the runs' median latencies there; no "
                  "ranks are started (write with -o)");
  cmd->add_option("--from-trace", opts->from_traces,
                  "--refine: MCR_LOG trace(s) of the program, e.g. one run per backend")
      ->delimiter(',');
  cmd->add_option("--min-ops", opts->min_ops,
                  "--refine: operations a backend must have run at a size for its median to count")
      ->capture_default_str();
  cmd->add_flag("--plot", opts->plot,
                "render latency vs size per op with gnuplot next to the table");
  cmd->add_option("--plot-format", opts->plot_format, "png or svg")->capture_default_str();
  cmd->add_flag("-q,--quiet", opts->quiet, "no progress lines on stderr");
  cmd->callback([opts, cmd] {
    if (!opts->validate.empty()) {
      refuse_flags(*cmd, kMeasuringFlags,
                   "does not apply to --validate, which checks a table file and exits");
      refuse_flags(*cmd,
                   {"--refine", "--from-trace", "--min-ops", "--hysteresis", "--output", "--plot",
                    "--plot-format"},
                   "does not apply to --validate, which checks a table file and exits");
      exit_code() = validate_table_file(opts->validate);
      return;
    }
    if (!opts->refine.empty()) {
      refuse_flags(*cmd, kMeasuringFlags,
                   "does not apply to --refine, which rebuilds a table's entries from traces "
                   "without measuring");
      refine(*opts, *cmd);
      return;
    }
    if (!opts->from_traces.empty()) {
      throw InvalidArgument("--from-trace is read by --refine only: name the table to refine");
    }
    refuse_flags(*cmd, {"--min-ops"},
                 "does not apply to a measuring run (--min-ops is read by --refine only)");
    if (cmd->count("--in-flight") > 0 && parse_forms(*opts) == std::vector{CallForm::sync}) {
      throw InvalidArgument(
          "--in-flight applies to the async form only (sync calls are timed one at a time): add "
          "--form async or --form both, or drop --in-flight");
    }
    // Every flag checked before init(): no rank waits on one that failed. The table and its plot
    // are written after minutes of measuring: their path and format are checked now too.
    bench::check_tune_flags(tune_options(*opts));  // all but the backends, which init() finds
    check_plot_option(*opts);
    Communicator world = init();
    try {
      tune(world, *opts);
    } catch (...) {
      finalize();
      throw;
    }
    finalize();
  });
}

}  // namespace mcr::cli
