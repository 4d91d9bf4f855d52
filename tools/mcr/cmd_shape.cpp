// `mcr shape`: transformer shape -> GEMMs -> predicted efficiency -> guideline checks -> better
// shapes.
//   mcr shape --preset gpt3-2.7b --device a100-80gb [--training] [--json | --csv]
//   mcr shape gemm --device h100-sxm --dtype bf16 -m 8192 -n 7680 -k 2560 --json
//   mcr shape sweep --preset gpt3-2.7b --device a100-80gb --vary h --from 2048 --to 3072 --step 64
//   mcr shape devices | presets
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <array>
#include <memory>

#include "commands.hpp"
#include "mcr/codesign/report.hpp"
#include "mcr/codesign/shape_report.hpp"
#include "mcr/errors.hpp"
#include "refuse_flags.hpp"
#include "shape_options.hpp"
#include "shape_print.hpp"

namespace mcr::cli {
namespace {

using namespace codesign;
using nlohmann::json;

struct ShapeOptions {
  ModelFlags model;
  std::string device = "a100-80gb";
  bool json_out = false;
  bool csv_out = false;
  bool no_advise = false;
  ShapeReportOptions report;  // --training, the advisor's and the layout's flags
};

// The advisor's flags do nothing without the advisor, and the CSV (one row per GEMM) holds
// neither advice nor memory: such flags are refused, naming them, rather than ignored.
void refuse_ignored(const ShapeOptions& o, const CLI::App& cmd) {
  if (o.no_advise || o.csv_out) {
    refuse_flags(
        cmd,
        {"--budget", "--max-head-dim", "--min-head-dim", "--top", "--tp-sizes", "--uncertainty"},
        fmt::format("sets the shape advisor, which {} does not run",
                    o.no_advise ? "--no-advise" : "--csv"));
  }
  if (o.csv_out) {
    refuse_flags(cmd,
                 {"--pp", "--dp", "--zero", "--checkpoint-activations", "--sequence-parallel",
                  "--gen-tokens"},
                 "sets the memory estimate, which --csv (one row per GEMM) does not hold");
  }
}

void run_analysis(const ShapeOptions& o) {
  const BuiltModel built = build_model_noted(o.model);
  const ModelShape& model = built.shape;
  const DeviceSpec device = resolve_device(o.device);
  for (const auto& w : built.warnings)
    fmt::print(stderr, "mcr shape: warning: {}\n", w);
  ShapeReportOptions options = o.report;
  options.advise = !o.no_advise && !o.csv_out;  // the CSV holds no advice
  const ShapeReport r = analyse_shape(model, device, options);
  if (o.csv_out) {
    fmt::print("{}", analysis_csv(r.analysis));
    return;
  }
  if (o.json_out) {
    json j = to_json(r, model, device, options);
    j["inputs"] = inputs_json(built);
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("Model {}\n", describe_model(model));
  fmt::print("{}", describe_inputs(built));
  fmt::print("{}", format_device(device, model.dtype));
  fmt::print("{}\n", format_calculators(r.params, r.flops, r.training_memory, r.inference_memory));
  fmt::print("GEMMs per layer per GPU (C[MxN] = A[MxK] B[KxN]):\n{}\n",
             format_gemm_table(r.analysis, device));
  fmt::print("{}\n", format_totals(r.analysis));
  fmt::print("{}\n", format_findings(r.findings));
  if (r.advised) {
    fmt::print("{}", format_advice(r.advice));
    if (!r.advice.candidates.empty()) {
      const Candidate& first = r.advice.candidates.front();
      fmt::print("\nWhy #1 ({}) runs at a higher TFLOP/s, per GEMM:\n{}", first.changes,
                 format_why_faster(r.analysis, first.analysis));
    }
  }
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
  cmd->add_flag("--training", opts->report.training, "include backward (dgrad, wgrad) GEMMs");
  cmd->add_flag("--json", opts->json_out, "JSON output (docs/shape-json.md)");
  cmd->add_flag("--csv", opts->csv_out, "CSV output: one row per GEMM");
  cmd->add_flag("--no-advise", opts->no_advise, "skip the shape advisor");
  cmd->add_option("--budget", opts->report.advisor.budget, "advisor: relative parameter budget")
      ->capture_default_str();
  cmd->add_option("--max-head-dim", opts->report.advisor.max_head_dim,
                  "advisor: largest h/a to consider")
      ->capture_default_str();
  cmd->add_option("--min-head-dim", opts->report.advisor.min_head_dim,
                  "advisor: smallest h/a to consider")
      ->capture_default_str();
  cmd->add_option("--top", opts->report.advisor.top, "advisor: candidates to show")
      ->capture_default_str();
  cmd->add_option("--tp-sizes", opts->report.advisor.tp_sizes,
                  "advisor: tensor-parallel sizes every candidate must allow (default: t and "
                  "those of 2, 4, 8 the input allows)")
      ->delimiter(',');
  cmd->add_option("--uncertainty", opts->report.advisor.uncertainty,
                  "advisor: relative speedups below this are marked as within the model's error "
                  "(default: the device's calibrated median held-out |error|, else 0.03)");
  cmd->add_option("--pp", opts->report.layout.pp, "memory: pipeline stages")->capture_default_str();
  cmd->add_option("--dp", opts->report.layout.dp, "memory: data-parallel size")
      ->capture_default_str();
  cmd->add_option("--zero", opts->report.layout.zero_stage, "memory: ZeRO stage 0-3")
      ->capture_default_str();
  cmd->add_flag("--checkpoint-activations", opts->report.layout.checkpoint_activations,
                "memory: full activation recomputation");
  cmd->add_flag("--sequence-parallel", opts->report.layout.sequence_parallel,
                "memory: sequence parallelism");
  cmd->add_option("--gen-tokens", opts->report.layout.generated_tokens,
                  "memory: tokens generated after the prompt (KV cache)")
      ->capture_default_str();

  add_shape_gemm_command(cmd);
  add_shape_sweep_command(cmd);

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

  // A subcommand runs alone: options of `mcr shape` itself given before it (`mcr shape --device X
  // gemm ...`) would be dropped without a word, so they are refused, naming where they belong.
  cmd->parse_complete_callback([cmd] {
    for (const auto* sub : cmd->get_subcommands()) {
      if (!sub->parsed()) continue;
      for (const CLI::Option* o : cmd->get_options()) {
        if (o->count() == 0 || o->get_name() == "--help") continue;
        throw InvalidArgument(fmt::format(
            "mcr shape: {} was given before the subcommand '{}', which does not read the options "
            "of `mcr shape`: put it after '{}' if that subcommand takes it (mcr shape {} --help)",
            o->get_name(), sub->get_name(), sub->get_name(), sub->get_name()));
      }
    }
  });
  cmd->callback([cmd, opts] {
    for (const auto* sub : cmd->get_subcommands()) {
      if (sub->parsed()) return;  // a subcommand did the work
    }
    if (opts->json_out && opts->csv_out) throw InvalidArgument("give --json or --csv, not both");
    refuse_ignored(*opts, *cmd);
    run_analysis(*opts);
  });
}

}  // namespace mcr::cli
