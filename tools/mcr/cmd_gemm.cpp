// `mcr gemm`: GEMM / batched-GEMM sweeps on this machine (CBLAS or cuBLASLt), optionally compared
// with the analyser's prediction for the same device. What runs, where, and the checks before it
// are mcr::gemmbench's (GemmRequest, prepare_sweep); this file maps flags and prints.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>

#include "commands.hpp"
#include "gemm_flags.hpp"
#include "gemm_report.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/request.hpp"
#include "mcr/gemmbench/sweep.hpp"
#include "number_checks.hpp"
#include "output_path.hpp"
#include "refuse_flags.hpp"

namespace mcr::cli {
namespace {

namespace cb = codesign::bench;

// Flags that set a field of the library's request are bound to it.
struct GemmArgs {
  cb::GemmRequest request;
  std::string format = "table";
  std::string output;
  bool quiet = false;
  bool dry_run = false;
  bool no_peak_probe = false;
  std::string input;
  std::string clock = "wall";
};

/// Measures the requested GEMMs, or reads them back with --input; --dry-run lists them unmeasured.
cb::MeasurementSet measure_or_load(const GemmArgs& a, const CLI::App& cmd) {
  if (!a.input.empty()) return cb::load_for_report(a.request, a.input);
  const auto p = cb::prepare_sweep(a.request);
  for (const auto& w : p.warnings)
    fmt::print(stderr, "mcr gemm: warning: {}\n", w);
  if (a.dry_run) {
    cb::MeasurementSet listing;
    listing.backend_description = p.runner->description();
    for (const auto& g : p.gemms)
      listing.rows.push_back(cb::GemmMeasurement{g, cb::Timing{}});
    return listing;
  }
  if (!a.quiet) {
    fmt::print(stderr, "mcr gemm: {} GEMMs on {}\n", p.gemms.size(), p.runner->description());
  }
  auto set = cb::run_sweep(*p.runner, p.gemms, a.request.measure,
                           a.quiet ? cb::SweepProgress{} : cb::SweepProgress{print_progress});
  set.device = p.device;
  set.command = rerun_command(cmd);
  print_skipped(set);
  if (set.rows.empty()) throw UnsupportedError("mcr gemm: every GEMM was skipped");
  return set;
}

// Flags that select or time GEMMs: --input reports saved measurements and reads none of them.
constexpr std::initializer_list<const char*> kMeasuringFlags = {"-m",
                                                                "-n",
                                                                "-k",
                                                                "--batch",
                                                                "--dtype",
                                                                "--backend",
                                                                "--threads",
                                                                "--gpu",
                                                                "--preset",
                                                                "--model",
                                                                "--seq",
                                                                "--micro-batch",
                                                                "--tp",
                                                                "--training",
                                                                "--dry-run",
                                                                "--no-peak-probe",
                                                                "--warmup",
                                                                "--warmup-time",
                                                                "--min-samples",
                                                                "--max-samples",
                                                                "--min-time",
                                                                "--max-time",
                                                                "--rotate-bytes",
                                                                "--clock"};

// Flags that a mode would ignore are refused, naming the flag.
void refuse_ignored(const GemmArgs& a, const CLI::App& cmd) {
  if (cmd.count("--input") > 0) {
    refuse_flags(cmd, kMeasuringFlags,
                 "does not apply to --input, which reports the measurements saved in the file "
                 "(only --device, --compare and the output flags apply)");
  }
  const auto& backend = a.request.backend;
  if (backend == "cpu") {
    refuse_flags(cmd, {"--gpu"}, "picks the CUDA device, and --backend cpu runs on the CPU");
  }
  // --gpu under auto asks for that GPU (run() below): --threads is ignored there too.
  if (backend == "gpu" || (backend == "auto" && cmd.count("--gpu") > 0)) {
    refuse_flags(cmd, {"--threads"},
                 "sets the CPU BLAS threads, and --backend gpu (or --gpu) runs on a GPU");
  }
  // The probe measures the local CPU's peak: a catalog or file device keeps its own.
  const auto& device = a.request.device;
  if (!device.empty() && device != "local") {
    refuse_flags(cmd, {"--no-peak-probe"},
                 fmt::format("applies to the local CPU, and --device '{}' is not it", device));
  }
  // The format flags set one field, in the order CLI11 defines them, not as typed: two of them
  // wrote CSV into a file named .json.
  const auto given = cmd.count("--format") + cmd.count("--json") + cmd.count("--csv");
  if (given > 1) {
    throw InvalidArgument("--format, --json, --csv: give one of them (they choose one format)");
  }
}

void run(const GemmArgs& given, const CLI::App& cmd) {
  refuse_ignored(given, cmd);
  if (given.format != "table" && given.format != "json" && given.format != "csv") {
    throw InvalidArgument(
        fmt::format("--format: '{}' is not one of table, json, csv", given.format));
  }
  const bool to_file = !given.output.empty() && given.output != "-";  // "-": stdout
  if (given.dry_run && (given.format != "table" || to_file)) {
    throw InvalidArgument(
        "--dry-run lists the GEMMs as text on stdout: --json, --csv, --format and -o apply to "
        "measurements; drop them or --dry-run");
  }
  // Written after the whole sweep: whether it can be is known first.
  if (to_file) check_writable(given.output, "-o");
  GemmArgs a = given;
  // A GPU named by index is asked for: under auto, a missing one fell back to the CPU without a
  // word, and a mistyped index gave CPU figures.
  if (cmd.count("--gpu") > 0 && a.request.backend == "auto") a.request.backend = "gpu";
  a.request.measure.clock = cb::parse_clock(a.clock);
  a.request.probe_peak = !a.no_peak_probe && !a.dry_run;
  const auto set = measure_or_load(a, cmd);
  if (a.dry_run) return print_dry_run(set);
  const bool compare = a.request.compare;
  const auto rows = compare ? cb::compare(set.rows, *set.device) : std::vector<cb::ComparisonRow>{};
  if (a.format == "json") {
    nlohmann::json j = set;
    if (compare) j["comparison"] = cb::comparison_json(rows, set.device->name);
    write_output(a.output, j.dump(2) + "\n");
  } else if (a.format == "csv") {
    std::ostringstream csv;
    compare ? cb::write_comparison_csv(csv, rows) : cb::write_measurements_csv(csv, set);
    write_output(a.output, csv.str());
  } else {
    write_table(a.output, set, compare ? &rows : nullptr);
  }
}

}  // namespace

void add_gemm_command(CLI::App& app) {
  auto args = std::make_shared<GemmArgs>();
  auto& r = args->request;
  auto* cmd = app.add_subcommand(
      "gemm",
      "Time GEMMs and batched GEMMs on this machine (CBLAS on the CPU, cuBLASLt on a GPU); "
      "C[MxN] = A[MxK] * B[KxN]");
  cmd->add_option("-m", r.m,
                  "M values: list and/or start:end[:step] ranges, e.g. 64,127,256:1024:256");
  cmd->add_option("-n", r.n, "N values (same syntax)");
  cmd->add_option("-k", r.k, "K values (same syntax)");
  cmd->add_option("--batch", r.batch, "batch counts for batched GEMMs (same syntax)")
      ->capture_default_str();
  cmd->add_option("--dtype", r.dtypes,
                  "element types, comma list: fp32, tf32, fp16, bf16, fp8, fp64 (default fp32 for "
                  "the grid, the model's dtype for --preset/--model)")
      ->delimiter(',');
  cmd->add_option("--backend", r.backend, "auto (GPU if present), cpu (CBLAS) or gpu (cuBLASLt)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  cmd->add_option("--threads", r.threads, "CPU BLAS threads (default: all usable cores)")
      ->check(whole_at_least(0));
  cmd->add_option("--gpu", r.gpu, "CUDA device index")
      ->capture_default_str()
      ->check(whole_at_least(0));
  cmd->add_option("--preset", r.presets,
                  "run the GEMMs `mcr shape` lists for this preset (repeatable)");
  cmd->add_option("--model", r.models, "same for a Hugging Face config.json (repeatable)");
  cmd->add_option("--seq", r.seq, "override the model's sequence length s")
      ->check(whole_at_least(1));
  cmd->add_option("--micro-batch", r.micro_batch, "override the model's microbatch b")
      ->check(whole_at_least(1));
  cmd->add_option("--tp", r.tp, "override the tensor-parallel size t")->check(whole_at_least(1));
  cmd->add_flag("--training", r.training, "also run the backward (dgrad, wgrad) GEMMs");
  cmd->add_flag("--compare", r.compare,
                "predict every GEMM for the device and report ratio, median |error| and Spearman");
  cmd->add_option("--device", r.device,
                  "device to predict for: catalog name, JSON file or 'local' (default: detect this "
                  "CPU/GPU)");
  cmd->add_option("--format", args->format, "table, json or csv")->capture_default_str();
  cmd->add_flag_callback(
      "--json", [args] { args->format = "json"; }, "same as --format json");
  cmd->add_flag_callback(
      "--csv", [args] { args->format = "csv"; }, "same as --format csv");
  cmd->add_option("-o,--output", args->output, "write the result here instead of stdout");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress on stderr");
  cmd->add_flag("--dry-run", args->dry_run, "list the GEMMs without running them");
  cmd->add_flag("--no-peak-probe", args->no_peak_probe,
                "local CPU: keep the fp32 peak estimated from CPU facts instead of measuring it "
                "with a quick SGEMM probe (reproducible device descriptions)");
  cmd->add_option("--input", args->input,
                  "report measurements saved by --json instead of running (e.g. --compare them "
                  "against another --device)")
      ->check(CLI::ExistingFile);
  add_measure_flags(cmd, r.measure);
  cmd->add_option("--clock", args->clock,
                  "wall, or cpu: process CPU time, which leaves out time the process is "
                  "descheduled (CPU backend with --threads 1; for busy shared machines)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wall", "cpu"}));
  cmd->callback([args, cmd] { run(*args, *cmd); });
}

}  // namespace mcr::cli
