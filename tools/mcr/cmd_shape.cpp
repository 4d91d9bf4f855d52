// `mcr shape`: transformer shape -> GEMMs -> predicted efficiency -> guideline checks -> better
// shapes.
//   mcr shape --preset gpt3-2.7b --device a100-80gb [--training] [--json | --csv]
//   mcr shape gemm --device h100-sxm --dtype bf16 -m 8192 -n 7680 -k 2560 --json
//   mcr shape sweep --preset gpt3-2.7b --device a100-80gb --vary h --from 2048 --to 3072 --step 64
//   mcr shape devices | presets
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "mcr/codesign/advisor.hpp"
#include "mcr/codesign/calculators.hpp"
#include "mcr/codesign/guidelines.hpp"
#include "mcr/codesign/report.hpp"
#include "mcr/errors.hpp"
#include "shape_options.hpp"
#include "shape_print.hpp"

namespace mcr::cli {
namespace {

using namespace codesign;
using nlohmann::json;

struct ShapeOptions {
  ModelFlags model;
  std::string device = "a100-80gb";
  bool training = false;
  bool json_out = false;
  bool csv_out = false;
  bool no_advise = false;
  AdvisorOptions advisor;
  ParallelLayout layout;
};

struct GemmOptions {
  std::string device = "a100-80gb";
  std::string dtype = "bf16";
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool json_out = false;
};

struct SweepOptions {
  ModelFlags model;
  std::string device = "a100-80gb";
  bool training = false;
  std::string field = "h";
  std::int64_t from = 0, to = 0, step = 64;
  std::string out;
  std::string plot_format = "png";
};

json inputs_json(const BuiltModel& b) {
  return {{"source", b.source},
          {"defaults", b.defaults},
          {"warnings", b.warnings},
          {"config_keys_used", b.used},
          {"config_keys_ignored", b.ignored}};
}

void run_analysis(const ShapeOptions& o) {
  const BuiltModel built = build_model_noted(o.model);
  const ModelShape& model = built.shape;
  const DeviceSpec device = resolve_device(o.device);
  for (const auto& w : built.warnings)
    fmt::print(stderr, "mcr shape: warning: {}\n", w);
  Advice advice;
  if (!o.no_advise) {
    AdvisorOptions ao = o.advisor;
    ao.training = o.training;
    advice = advise(model, device, ao);
  }
  // The advisor analyses the input first; reuse that analysis instead of repeating it.
  const ModelAnalysis analysis =
      o.no_advise ? analyze(model, device, o.training) : advice.input_analysis;
  auto findings = check_guidelines(model, device, analysis);
  for (auto& f : check_memory(model, device, o.layout, o.training))
    findings.push_back(std::move(f));
  const ParamCount params = count_parameters(model);
  const FlopCount flops = count_flops(model);
  const MemoryEstimate train_mem = training_memory(model, o.layout);
  const MemoryEstimate infer_mem = inference_memory(model, o.layout);
  if (o.csv_out) {
    fmt::print("{}", analysis_csv(analysis));
    return;
  }
  if (o.json_out) {
    json j = analysis_json(analysis);
    j["inputs"] = inputs_json(built);
    j["params"] = params_json(params);
    j["flops"] = flops_json(flops);
    j["memory"] = {{"training", memory_json(train_mem)},
                   {"inference", memory_json(infer_mem)},
                   {"device_memory_gb", device.memory_gb},
                   {"layout",
                    {{"t", model.t},
                     {"pp", o.layout.pp},
                     {"dp", o.layout.dp},
                     {"zero_stage", o.layout.zero_stage},
                     {"checkpoint_activations", o.layout.checkpoint_activations},
                     {"sequence_parallel", o.layout.sequence_parallel},
                     {"generated_tokens", o.layout.generated_tokens}}}};
    j["guidelines"] = findings_json(findings);
    if (!o.no_advise) j["advice"] = advice_json(advice);
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("Model {}\n", describe_model(model));
  fmt::print("{}", describe_inputs(built));
  fmt::print("{}", format_device(device, model.dtype));
  fmt::print("{}\n", format_calculators(params, flops, train_mem, infer_mem));
  fmt::print("GEMMs per layer per GPU (C[MxN] = A[MxK] B[KxN]):\n{}\n",
             format_gemm_table(analysis, device));
  fmt::print("{}\n", format_totals(analysis));
  fmt::print("{}\n", format_findings(findings));
  if (!o.no_advise) {
    fmt::print("{}", format_advice(advice));
    if (!advice.candidates.empty()) {
      const Candidate& first = advice.candidates.front();
      fmt::print("\nWhy #1 ({}) is faster, per GEMM:\n{}", first.changes,
                 format_why_faster(analysis, first.analysis));
    }
  }
}

void run_gemm(const GemmOptions& o) {
  const DeviceSpec device = resolve_device(o.device);
  Gemm g;
  g.role = "gemm";
  g.m = o.m;
  g.n = o.n;
  g.k = o.k;
  g.batch = o.batch;
  g.dtype = parse_dtype(o.dtype);
  const GemmPrediction p = predict(g, device);
  if (o.json_out) {
    json j = gemm_result_json(g, p);
    j["device"] = device.name;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{} {}x{}x{} batch {} {} on {}: {:.2f} us, {:.1f} TFLOP/s\n  {}\n", g.role, g.m, g.n,
             g.k, g.batch, to_string(g.dtype), device.name, p.time_s * 1e6, p.tflops,
             p.explanation);
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::error_code ec;
    const auto candidate = std::filesystem::path(dir) / program;
    if (std::filesystem::is_regular_file(candidate, ec)) return true;
  }
  return false;
}

void run_sweep(const SweepOptions& o) {
  const ModelShape model = build_model(o.model);
  const DeviceSpec device = resolve_device(o.device);
  const std::int64_t from = o.from > 0 ? o.from : get_dimension(model, o.field);
  const std::int64_t to = o.to > 0 ? o.to : from;
  const auto points = sweep(model, device, o.training, o.field, from, to, o.step);
  const std::string prefix = o.out.empty() ? fmt::format("shape-sweep-{}", o.field) : o.out;
  const std::string csv_path = prefix + ".csv";
  {
    std::ofstream csv(csv_path);
    if (!csv) throw Error(fmt::format("cannot write '{}'", csv_path));
    csv << sweep_csv(o.field, points);
  }
  fmt::print("Sweep of {} for {} on {}\n{}", o.field, describe_model(model), device.name,
             format_sweep(o.field, points));
  fmt::print("CSV written to {}\n", csv_path);
  if (o.plot_format != "png" && o.plot_format != "svg") {
    throw InvalidArgument(
        fmt::format("--plot-format '{}' is not supported: use png or svg", o.plot_format));
  }
  if (!on_path("gnuplot")) {
    fmt::print("{}gnuplot is not on PATH: text plot above; the CSV has the curve\n",
               ascii_plot(o.field, points));
    return;
  }
  const std::string plot_path = prefix + "." + o.plot_format;
  const std::string script_path = prefix + ".gp";
  {
    std::ofstream gp(script_path);
    gp << fmt::format(
        "set terminal {} size 900,500\nset output '{}'\nset datafile separator ','\n"
        "set key autotitle columnhead\nset xlabel '{}'\nset ylabel 'predicted TFLOP/s per GPU'\n"
        "set title 'mcr shape sweep: {} on {}'\nset grid\n"
        "plot '{}' using 1:($2==1?$5:1/0) with linespoints title 'layer', "
        "'' using 1:($2==1?$6:1/0) with linespoints title 'model'\n",
        o.plot_format == "png" ? "pngcairo" : "svg", plot_path, o.field, model.name, device.name,
        csv_path);
  }
  const std::string command = fmt::format("gnuplot '{}'", script_path);
  if (std::system(command.c_str()) != 0) {
    fmt::print("gnuplot failed: no plot rendered (script kept at {})\n", script_path);
    return;
  }
  fmt::print("Plot written to {}\n", plot_path);
}

}  // namespace

void add_shape_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "shape", "co-design analyser: transformer shape -> GEMMs -> predicted efficiency -> advice");
  cmd->require_subcommand(0, 1);
  auto opts = std::make_shared<ShapeOptions>();
  add_model_options(cmd, opts->model);
  cmd->add_option("--device", opts->device, "catalog name or device JSON file")
      ->capture_default_str();
  cmd->add_flag("--training", opts->training, "include backward (dgrad, wgrad) GEMMs");
  cmd->add_flag("--json", opts->json_out, "JSON output (docs/shape-json.md)");
  cmd->add_flag("--csv", opts->csv_out, "CSV output: one row per GEMM");
  cmd->add_flag("--no-advise", opts->no_advise, "skip the shape advisor");
  cmd->add_option("--budget", opts->advisor.budget, "advisor: relative parameter budget")
      ->capture_default_str();
  cmd->add_option("--max-head-dim", opts->advisor.max_head_dim, "advisor: largest h/a to consider")
      ->capture_default_str();
  cmd->add_option("--min-head-dim", opts->advisor.min_head_dim, "advisor: smallest h/a to consider")
      ->capture_default_str();
  cmd->add_option("--top", opts->advisor.top, "advisor: candidates to show")->capture_default_str();
  cmd->add_option("--tp-sizes", opts->advisor.tp_sizes,
                  "advisor: tensor-parallel sizes every candidate must allow (default: t and "
                  "those of 2, 4, 8 the input allows)")
      ->delimiter(',');
  cmd->add_option("--uncertainty", opts->advisor.uncertainty,
                  "advisor: relative speedups below this are marked as within the model's error "
                  "(default: the device's calibrated median held-out |error|, else 0.03)");
  cmd->add_option("--pp", opts->layout.pp, "memory: pipeline stages")->capture_default_str();
  cmd->add_option("--dp", opts->layout.dp, "memory: data-parallel size")->capture_default_str();
  cmd->add_option("--zero", opts->layout.zero_stage, "memory: ZeRO stage 0-3")
      ->capture_default_str();
  cmd->add_flag("--checkpoint-activations", opts->layout.checkpoint_activations,
                "memory: full activation recomputation");
  cmd->add_flag("--sequence-parallel", opts->layout.sequence_parallel,
                "memory: sequence parallelism");
  cmd->add_option("--gen-tokens", opts->layout.generated_tokens,
                  "memory: tokens generated after the prompt (KV cache)")
      ->capture_default_str();

  auto* gemm = cmd->add_subcommand("gemm", "predict one GEMM: C[MxN] = A[MxK] B[KxN], batch times");
  auto gopts = std::make_shared<GemmOptions>();
  gemm->add_option("--device", gopts->device, "catalog name or device JSON file")
      ->capture_default_str();
  gemm->add_option("--dtype", gopts->dtype, "fp32, tf32, fp16, bf16, fp8")->capture_default_str();
  gemm->add_option("-m", gopts->m, "M (rows of C)")->required();
  gemm->add_option("-n", gopts->n, "N (columns of C)")->required();
  gemm->add_option("-k", gopts->k, "K (reduction)")->required();
  gemm->add_option("--batch", gopts->batch, "batch count (BMM)")->capture_default_str();
  gemm->add_flag("--json", gopts->json_out, "JSON output");
  gemm->callback([gopts] { run_gemm(*gopts); });

  auto* sw =
      cmd->add_subcommand("sweep", "vary one dimension; write the throughput curve (CSV, plot)");
  auto sopts = std::make_shared<SweepOptions>();
  add_model_options(sw, sopts->model);
  sw->add_option("--device", sopts->device, "catalog name or device JSON file")
      ->capture_default_str();
  sw->add_flag("--training", sopts->training, "include backward GEMMs");
  sw->add_option("--vary", sopts->field, "h, a, a_kv, L, v, s, b, d_ff, t, experts, top_k")
      ->capture_default_str();
  sw->add_option("--from", sopts->from, "first value (default: the model's)");
  sw->add_option("--to", sopts->to, "last value, inclusive");
  sw->add_option("--step", sopts->step, "step")->capture_default_str();
  sw->add_option("--out", sopts->out, "output prefix (default shape-sweep-<field>)");
  sw->add_option("--plot-format", sopts->plot_format, "png or svg (needs gnuplot on PATH)")
      ->capture_default_str();
  sw->callback([sopts] { run_sweep(*sopts); });

  auto* devices = cmd->add_subcommand("devices", "list the device catalog");
  devices->callback([] {
    for (const auto& name : catalog_devices()) {
      const DeviceSpec d = device_from_catalog(name);
      fmt::print("{:<16} {:<44} {:>4} units  {:>7.1f} TFLOP/s bf16/fp16\n", name, d.description,
                 d.compute_units,
                 d.supports(DType::bf16) ? d.peak_for(DType::bf16) : d.peak_for(DType::fp16));
    }
  });
  auto* presets = cmd->add_subcommand("presets", "list the model presets");
  presets->callback([] {
    for (const auto& name : preset_names())
      fmt::print("{}\n", describe_model(load_preset(name)));
  });

  cmd->callback([cmd, opts] {
    for (const auto* sub : cmd->get_subcommands()) {
      if (sub->parsed()) return;  // a subcommand did the work
    }
    if (opts->json_out && opts->csv_out) throw InvalidArgument("give --json or --csv, not both");
    run_analysis(*opts);
  });
}

}  // namespace mcr::cli
