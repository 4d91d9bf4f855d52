// `mcr gemm`: GEMM / batched-GEMM sweeps on this machine (CBLAS or cuBLASLt), optionally compared
// with the analyser's prediction for the same device.
#include <fmt/core.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "gemm_report.hpp"
#include "mcr/codesign/model.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/compare.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/gemmbench/measurement.hpp"
#include "mcr/gemmbench/range.hpp"
#include "mcr/gemmbench/runner.hpp"
#include "mcr/gemmbench/sweep.hpp"

namespace mcr::cli {
namespace {

namespace cb = codesign::bench;

struct GemmArgs {
  std::string m, n, k, batch = "1";
  std::vector<std::string> dtypes;
  std::string backend = "auto";
  int threads = 0;
  int gpu = 0;
  std::vector<std::string> presets, models;
  std::int64_t seq = 0, micro_batch = 0, tp = 0;
  bool training = false;
  bool compare = false;
  std::string device;
  std::string format = "table";
  std::string output;
  bool quiet = false;
  bool dry_run = false;
  bool no_peak_probe = false;
  std::string input;
  std::string clock = "wall";
  cb::MeasureOptions measure;
};

std::vector<codesign::DType> parse_dtypes(const std::vector<std::string>& names) {
  std::vector<codesign::DType> out;
  for (const auto& list : names) {
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
      try {
        out.push_back(codesign::parse_dtype(item));
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(fmt::format("--dtype: {}", e.what()));
      }
    }
  }
  return out;
}

std::vector<codesign::Gemm> model_gemms(const GemmArgs& a,
                                        const std::vector<codesign::DType>& dtypes) {
  std::vector<codesign::ModelShape> shapes;
  for (const auto& p : a.presets)
    shapes.push_back(codesign::load_preset(p));
  for (const auto& path : a.models)
    shapes.push_back(codesign::load_hf_config(path));
  std::vector<codesign::Gemm> out;
  for (auto& shape : shapes) {
    if (a.seq > 0) shape.s = a.seq;
    if (a.micro_batch > 0) shape.b = a.micro_batch;
    if (a.tp > 0) shape.t = a.tp;
    shape.validate();
    auto gemms = codesign::layer_gemms(shape, a.training);
    const auto logits = codesign::logit_gemms(shape, a.training);
    gemms.insert(gemms.end(), logits.begin(), logits.end());
    // An explicit --dtype replaces the model's dtype (e.g. fp32 on a CPU without bf16 GEMM).
    const auto run_dtypes = dtypes.empty() ? std::vector<codesign::DType>{shape.dtype} : dtypes;
    for (const auto dt : run_dtypes) {
      for (auto g : gemms) {
        g.dtype = dt;
        g.role = shape.name.empty() ? g.role : shape.name + ":" + g.role;
        out.push_back(std::move(g));
      }
    }
  }
  return out;
}

std::vector<codesign::Gemm> all_gemms(const GemmArgs& a) {
  const auto dtypes = parse_dtypes(a.dtypes);
  auto gemms = model_gemms(a, dtypes);
  const bool any_dim = !a.m.empty() || !a.n.empty() || !a.k.empty();
  if (any_dim) {
    if (a.m.empty() || a.n.empty() || a.k.empty()) {
      throw InvalidArgument("-m, -n and -k must be given together (each a list or start:end:step)");
    }
    const auto grid = cb::grid_gemms(
        cb::parse_dim_values(a.m, "-m"), cb::parse_dim_values(a.n, "-n"),
        cb::parse_dim_values(a.k, "-k"), cb::parse_dim_values(a.batch, "--batch"),
        dtypes.empty() ? std::vector<codesign::DType>{codesign::DType::fp32} : dtypes);
    gemms.insert(gemms.end(), grid.begin(), grid.end());
  }
  if (gemms.empty()) {
    throw InvalidArgument(
        "nothing to run: give -m/-n/-k (lists or start:end:step), --preset NAME or --model CONFIG");
  }
  return gemms;
}

std::unique_ptr<cb::GemmRunner> make_runner(const GemmArgs& a) {
  if (a.backend == "cpu") return cb::make_cblas_runner(a.threads);
  if (a.backend == "gpu") return cb::make_cublaslt_runner(a.gpu);
  // auto: a GPU when one is visible, else the host.
  if (cb::cublaslt_available() && cb::cuda_device_count() > a.gpu) {
    return cb::make_cublaslt_runner(a.gpu);
  }
  return cb::make_cblas_runner(a.threads);
}

/// The device predictions refer to: --device if given, else this machine's CPU or GPU.
std::optional<codesign::DeviceSpec> local_device(const GemmArgs& a, const cb::GemmRunner& runner,
                                                 bool required) {
  if (!a.device.empty() && a.device != "local") return codesign::resolve_device(a.device);
  try {
    if (runner.backend() == "cublaslt") {
      const auto gpu = cb::detect_gpu(a.gpu);
      if (!gpu) throw Error("the GPU disappeared");
      return cb::gpu_device_spec(*gpu);
    }
    return cb::local_cpu_device({a.threads, !a.no_peak_probe && !a.dry_run});
  } catch (const InvalidArgument&) {
    if (required) throw;
    return std::nullopt;
  }
}

void progress_line(std::size_t i, std::size_t total, const cb::GemmMeasurement& m) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  const auto& g = m.gemm;
  fmt::print(stderr, "{}[{:>4}/{}] {} m={} n={} k={} batch={} {}: {:.2f} us, {:.4f} TFLOP/s{}",
             tty ? "\r\033[K" : "", i + 1, total, g.role, g.m, g.n, g.k, g.batch,
             to_string(g.dtype), m.timing.median_s * 1e6, m.tflops(),
             tty && i + 1 < total ? "" : "\n");
  std::fflush(stderr);
}

/// Measures the requested GEMMs, or reads them back with --input.
cb::MeasurementSet measure_or_load(const GemmArgs& a, const CLI::App& cmd) {
  if (!a.input.empty()) {
    auto set = cb::load_measurements(a.input);
    if (!a.device.empty() && a.device != "local") set.device = codesign::resolve_device(a.device);
    if (a.compare && !set.device) {
      throw InvalidArgument(
          fmt::format("--compare: {} records no device; name one with --device", a.input));
    }
    return set;
  }
  const auto gemms = all_gemms(a);
  if (a.measure.clock == cb::Clock::process_cpu && (a.backend == "gpu" || a.threads != 1)) {
    throw InvalidArgument(
        "--clock cpu: process CPU time measures a GEMM only on the CPU backend with --threads 1");
  }
  auto runner = make_runner(a);
  for (const auto& g : gemms) {
    if (!runner->supports(g.dtype)) {
      throw UnsupportedError(fmt::format("--dtype: {} cannot run on the {} backend ({})",
                                         to_string(g.dtype), runner->backend(),
                                         runner->description()));
    }
  }
  auto device = local_device(a, *runner, a.compare);
  if (a.compare) {
    // Checked before measuring, so a sweep is not thrown away at the end.
    for (const auto& g : gemms) {
      if (!device->supports(g.dtype)) {
        throw InvalidArgument(fmt::format("--compare: device '{}' has no {} peak to predict with",
                                          device->name, to_string(g.dtype)));
      }
    }
  }
  if (a.dry_run) {
    cb::MeasurementSet listing;
    listing.backend_description = runner->description();
    for (const auto& g : gemms)
      listing.rows.push_back(cb::GemmMeasurement{g, cb::Timing{}});
    return listing;
  }
  if (!a.quiet) {
    fmt::print(stderr, "mcr gemm: {} GEMMs on {}\n", gemms.size(), runner->description());
  }
  auto set = cb::run_sweep(*runner, gemms, a.measure,
                           a.quiet ? cb::SweepProgress{} : cb::SweepProgress{progress_line});
  set.device = device;
  set.command = rerun_command(cmd);
  for (const auto& k : set.skipped) {
    fmt::print(stderr, "mcr gemm: skipped {} m={} n={} k={} batch={} {}: {}\n", k.gemm.role,
               k.gemm.m, k.gemm.n, k.gemm.k, k.gemm.batch, to_string(k.gemm.dtype), k.reason);
  }
  if (set.rows.empty()) throw UnsupportedError("mcr gemm: every GEMM was skipped");
  return set;
}

void run(const GemmArgs& a, const CLI::App& cmd) {
  if (a.format != "table" && a.format != "json" && a.format != "csv") {
    throw InvalidArgument(fmt::format("--format: '{}' is not one of table, json, csv", a.format));
  }
  GemmArgs args = a;
  args.measure.clock = cb::parse_clock(a.clock);
  const auto set = measure_or_load(args, cmd);
  if (a.dry_run) {
    fmt::print("{} GEMMs would run on {}\n", set.rows.size(), set.backend_description);
    for (const auto& r : set.rows) {
      const auto& g = r.gemm;
      fmt::print("{} m={} n={} k={} batch={} {} ({:.3g} GFLOP)\n", g.role, g.m, g.n, g.k, g.batch,
                 to_string(g.dtype), g.flops() / 1e9);
    }
    return;
  }
  const auto& device = set.device;
  std::vector<cb::ComparisonRow> rows;
  if (a.compare) rows = cb::compare(set.rows, *device);

  if (a.format == "json") {
    nlohmann::json j = set;
    if (a.compare) {
      j["comparison"] = {
          {"device", device->name}, {"rows", rows}, {"summary", cb::summarize(rows)}};
    }
    write_output(a.output, j.dump(2) + "\n");
  } else if (a.format == "csv") {
    std::ostringstream csv;
    if (a.compare) {
      csv << "role,m,n,k,batch,dtype,median_s,measured_tflops,predicted_tflops,ratio,abs_pct_"
             "error\n";
      for (const auto& r : rows) {
        const auto& g = r.measured.gemm;
        csv << fmt::format("{},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", g.role, g.m,
                           g.n, g.k, g.batch, to_string(g.dtype), r.measured.timing.median_s,
                           r.measured_tflops, r.predicted_tflops, r.ratio, r.abs_pct_error);
      }
    } else {
      cb::write_measurements_csv(csv, set);
    }
    write_output(a.output, csv.str());
  } else {
    std::FILE* out = stdout;
    if (!a.output.empty() && a.output != "-") {
      out = std::fopen(a.output.c_str(), "w");
      if (!out) throw Error(fmt::format("-o: cannot write '{}'", a.output));
    }
    if (a.compare) {
      print_comparison_table(out, set, rows, device->name);
    } else {
      print_measurements_table(out, set);
    }
    if (out != stdout) std::fclose(out);
  }
}

}  // namespace

void add_gemm_command(CLI::App& app) {
  auto args = std::make_shared<GemmArgs>();
  auto* cmd = app.add_subcommand(
      "gemm",
      "Time GEMMs and batched GEMMs on this machine (CBLAS on the CPU, cuBLASLt on a GPU); "
      "C[MxN] = A[MxK] * B[KxN]");
  cmd->add_option("-m", args->m,
                  "M values: list and/or start:end[:step] ranges, e.g. 64,127,256:1024:256");
  cmd->add_option("-n", args->n, "N values (same syntax)");
  cmd->add_option("-k", args->k, "K values (same syntax)");
  cmd->add_option("--batch", args->batch, "batch counts for batched GEMMs (same syntax)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtypes,
                  "element types, comma list: fp32, tf32, fp16, bf16, fp8, fp64 (default fp32 for "
                  "the grid, the model's dtype for --preset/--model)")
      ->delimiter(',');
  cmd->add_option("--backend", args->backend,
                  "auto (GPU if present), cpu (CBLAS) or gpu (cuBLASLt)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  cmd->add_option("--threads", args->threads, "CPU BLAS threads (default: all usable cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpu", args->gpu, "CUDA device index")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--preset", args->presets,
                  "run the GEMMs `mcr shape` lists for this preset (repeatable)");
  cmd->add_option("--model", args->models, "same for a Hugging Face config.json (repeatable)");
  cmd->add_option("--seq", args->seq, "override the model's sequence length s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--micro-batch", args->micro_batch, "override the model's microbatch b")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tp", args->tp, "override the tensor-parallel size t")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--training", args->training, "also run the backward (dgrad, wgrad) GEMMs");
  cmd->add_flag("--compare", args->compare,
                "predict every GEMM for the device and report ratio, median |error| and Spearman");
  cmd->add_option("--device", args->device,
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
  auto& m = args->measure;
  cmd->add_option("--warmup", m.warmup_iterations, "untimed calls before sampling (at least)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--warmup-time", m.warmup_seconds, "seconds of warmup (at least)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-samples", m.min_samples, "timed samples per GEMM (at least)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-samples", m.max_samples, "timed samples per GEMM (at most)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-time", m.min_seconds, "keep sampling until this many seconds were timed")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-time", m.max_seconds,
                  "stop sampling after this many seconds (past min-samples)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--rotate-bytes", m.rotation_bytes,
                  "bytes of rotated A/B/C copies (default 2x the last-level cache / L2)");
  cmd->add_option("--clock", args->clock,
                  "wall, or cpu: process CPU time, which leaves out time the process is "
                  "descheduled (CPU backend with --threads 1; for busy shared machines)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wall", "cpu"}));
  cmd->callback([args, cmd] { run(*args, *cmd); });
}

}  // namespace mcr::cli
