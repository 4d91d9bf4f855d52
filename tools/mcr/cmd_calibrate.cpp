// `mcr calibrate MEASUREMENTS.json --device NAME -o device.json`: fits a device's efficiency
// parameters to `mcr gemm --json` measurements and reports the error before and after on a seeded,
// held-out part of the data.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.hpp"
#include "gemm_report.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/calibrate.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/gemmbench/measurement.hpp"
#include "number_checks.hpp"
#include "output_path.hpp"

namespace mcr::cli {
namespace {

namespace cb = codesign::bench;

struct CalibrateArgs {
  std::string measurements;
  std::string device;
  std::string output;
  bool json = false;
  int threads = 0;
  bool no_peak_probe = false;
  cb::CalibrationOptions options;
};

void run(const CalibrateArgs& a) {
  // The device is written after the fit: whether it can be is known first, and that it would not
  // replace the measurements it was fitted to.
  std::error_code ec;
  if (!a.output.empty() &&
      (a.output == a.measurements || std::filesystem::equivalent(a.output, a.measurements, ec))) {
    throw InvalidArgument(
        fmt::format("-o '{}' is the measurements file: the calibrated device would overwrite the "
                    "measurements; name another file",
                    a.output));
  }
  if (!a.output.empty()) check_writable(a.output, "-o");
  if (a.device != "local" && (a.threads != 0 || a.no_peak_probe)) {
    throw InvalidArgument(
        fmt::format("{} applies to --device local only (it sets how this CPU is probed); drop it",
                    a.threads != 0 ? "--threads" : "--no-peak-probe"));
  }
  const auto set = cb::load_measurements(a.measurements);
  if (set.rows.empty()) {
    throw InvalidArgument(fmt::format("{}: contains no measurements", a.measurements));
  }
  codesign::DeviceSpec start;
  if (a.device == "local") {
    start = cb::local_cpu_device({a.threads, !a.no_peak_probe});
  } else if (!a.device.empty()) {
    start = codesign::resolve_device(a.device);
  } else if (set.device) {
    start = *set.device;
  } else {
    throw InvalidArgument(fmt::format(
        "--device: {} records no device, so name one (catalog name or JSON file)", a.measurements));
  }
  // The seed goes to stderr first so that even an interrupted run can be reproduced.
  fmt::print(stderr, "mcr calibrate: {} measurements, device '{}', hold-out {:.0f}%, seed {}\n",
             set.rows.size(), start.name, a.options.holdout_fraction * 100, a.options.seed);
  cb::CalibrationOptions options = a.options;
  options.data_label = a.measurements;
  const auto result = cb::calibrate(set.rows, start, options);
  if (!a.output.empty()) codesign::save_device(result.device, a.output);
  if (a.json) {
    nlohmann::json j = result;
    j["device"] = result.device.name;
    j["measurements"] = a.measurements;
    if (!a.output.empty()) j["output"] = a.output;
    fmt::print("{}\n", j.dump(2));
  } else {
    print_calibration(stdout, result, start);
    if (const auto& pe = result.device.prediction_error) {
      fmt::print(
          "  error bar stored with the device (prediction_error): median |error| {:.1f}%, "
          "p90 {:.1f}% over {} held-out GEMMs\n",
          pe->median_abs_pct_error, pe->p90_abs_pct_error, pe->count);
    } else {
      fmt::print("  nothing held out: no error bar stored with the device ({})\n",
                 a.options.holdout_fraction > 0
                     ? "every held-out row repeats a fitted shape; use a larger --holdout"
                     : "use --holdout > 0");
    }
    if (!a.output.empty()) fmt::print("calibrated device written to {}\n", a.output);
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Fit a device's efficiency parameters (achievable peak, alignment tiers, overheads) to "
      "`mcr gemm --json` measurements");
  cmd->add_option("measurements", args->measurements,
                  "measurements JSON written by mcr gemm --json")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--device", args->device,
                  "device to start from: catalog name, JSON file or 'local' (this CPU, its fp32 "
                  "peak measured by a quick SGEMM probe) (default: the device recorded in the "
                  "measurements)");
  cmd->add_option("--threads", args->threads,
                  "with --device local: BLAS threads the measurements used (default: all usable "
                  "cores)")
      ->check(whole_at_least(0));
  cmd->add_flag("--no-peak-probe", args->no_peak_probe,
                "with --device local: keep the fp32 peak estimated from CPU facts");
  cmd->add_option("-o,--output", args->output, "write the calibrated device JSON here");
  cmd->add_option("--holdout", args->options.holdout_fraction,
                  "fraction of measurements held out of the fit to judge it, in [0, 0.95]")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--seed", args->options.seed, "seed of the train/hold-out split")
      ->capture_default_str();
  cmd->add_option("--max-evals", args->options.max_evaluations,
                  "objective evaluations per Nelder-Mead run")
      ->capture_default_str()
      ->check(whole_at_least(1));
  cmd->add_option("--restarts", args->options.restarts,
                  "extra Nelder-Mead runs from the best point")
      ->capture_default_str()
      ->check(whole_at_least(0));
  cmd->add_option("--fix", args->options.fixed,
                  "hold this parameter at the starting device's value (name as the result lists "
                  "it, e.g. 'alignment_tiers[2B].factor'; repeatable)");
  cmd->add_flag("--json", args->json, "print the result as JSON");
  cmd->callback([args] { run(*args); });
}

}  // namespace mcr::cli
