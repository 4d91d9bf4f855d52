// `mcr plan`: training step time, TFLOP/s, memory per GPU and the best parallel layout, from the
// codesign GEMM model and the system's links or measured tuning tables. The planning itself lives
// in mcr::plan; this file parses flags and prints.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "mcr/codesign/device.hpp"
#include "mcr/codesign/dtype.hpp"
#include "mcr/errors.hpp"
#include "mcr/gemmbench/local_device.hpp"
#include "mcr/plan/search.hpp"
#include "plan_print.hpp"
#include "shape_options.hpp"

namespace mcr::cli {

namespace {

struct PlanArgs {
  ModelFlags model;  // also holds --tp, --micro-batch and --dtype
  std::string device;
  std::string system = "dgx-a100";
  std::optional<int> gpus, pp, dp, interleave, zero, cp, ep, etp;
  double capacity_factor = 0;
  std::string moe_dispatcher = "alltoall";
  bool moe_glu_clamp = false;
  std::optional<std::string> fp8;
  bool fp8_params = false;
  bool distributed_optimizer = false;
  bool tp_comm_overlap = false;
  bool pp_comm_overlap = false;
  bool uneven_pipeline = false;
  std::optional<std::string> grad_dtype;
  double optimizer_bytes = 12;
  std::optional<std::int64_t> global_batch;
  std::optional<std::string> recompute;
  std::vector<std::string> recompute_modules;
  bool sequence_parallel = false;
  bool allow_tp_across_nodes = false;
  bool no_dp_overlap = false;
  bool no_peak_probe = false;
  std::vector<std::string> comm_tables;
  std::string rules;
  bool json = false;
  bool search = false;
  bool advise = false;
  std::string validate;
  int top = 10;
  double budget = 0.02;
  double dp_bucket_mb = 25;  // PyTorch DDP's bucket_cap_mb, and perf/train_step's
};

/// The planner's options from the flags; rejects a bucket size that is not a positive, finite
/// number of megabytes before anything is planned.
plan::PlanOptions plan_options(const PlanArgs& a) {
  if (!(std::isfinite(a.dp_bucket_mb) && a.dp_bucket_mb > 0)) {
    throw InvalidArgument(fmt::format(
        "--dp-bucket-mb {}: must be a positive, finite number of megabytes (10^6 bytes)",
        a.dp_bucket_mb));
  }
  if (!(std::isfinite(a.optimizer_bytes) && a.optimizer_bytes >= 0)) {
    throw InvalidArgument(
        fmt::format("--optimizer-bytes {}: must be a finite number of bytes per parameter >= 0",
                    a.optimizer_bytes));
  }
  plan::PlanOptions o;
  o.dp_bucket_bytes = a.dp_bucket_mb * 1e6;
  o.optimizer_bytes_per_param = a.optimizer_bytes;
  o.moe_glu_clamp = a.moe_glu_clamp;
  if (a.grad_dtype)
    o.grad_bytes_per_param = codesign::dtype_bytes(codesign::parse_dtype(*a.grad_dtype));
  return o;
}

/// The system's device: --device, else the catalog entry the system names, else (local-cpu) this
/// machine's CPU with one core per rank, its fp32 peak measured by the quick SGEMM peak probe on
/// one core unless --no-peak-probe asks for the estimate from CPU facts.
codesign::DeviceSpec pick_device(const PlanArgs& a, const plan::SystemSpec& sys) {
  if (!a.device.empty() && a.device != "local") return codesign::resolve_device(a.device);
  const std::string name = a.device.empty() ? sys.device : "local-cpu";
  if (name != codesign::bench::kLocalCpuName) return codesign::device_from_catalog(name);
  return codesign::bench::local_cpu_device({1, !a.no_peak_probe});
}

std::string peak_line(const codesign::DeviceSpec& dev, codesign::DType dtype) {
  const auto j = plan::peak_to_json(dev, dtype);
  return fmt::format("device peak: {} {} TFLOP/s ({})\n", j["dtype"].get<std::string>(),
                     dev.supports(dtype) ? fmt::format("{:.4g}", dev.peak_for(dtype)) : "none",
                     j["source"].get<std::string>());
}

plan::CommModel make_comm(const PlanArgs& a, const plan::SystemSpec& sys,
                          const codesign::DeviceSpec& dev) {
  plan::CommModel comm(sys, dev.vendor != "cpu");
  for (const auto& arg : a.comm_tables) {
    auto [tier, path] = plan::parse_table_argument(arg);
    comm.add_table(tier, TuningTable::load(path));
  }
  if (!a.rules.empty()) comm.set_rules(RuleSet::parse(a.rules));
  return comm;
}

plan::Layout layout_from(const PlanArgs& a) {
  plan::Layout l;
  l.gpus = a.gpus.value_or(0);
  l.tp = static_cast<int>(a.model.t.value_or(1));
  l.pp = a.pp.value_or(1);
  l.dp = a.dp.value_or(0);
  l.micro_batch = a.model.b.value_or(1);
  l.global_batch = a.global_batch.value_or(0);
  l.interleave = a.interleave.value_or(1);
  if (a.recompute) l.recompute = plan::parse_recompute(*a.recompute);
  l.recompute_modules = a.recompute_modules;
  l.sequence_parallel = a.sequence_parallel;
  l.zero = a.zero.value_or(0);
  l.allow_tp_across_nodes = a.allow_tp_across_nodes;
  l.dp_overlap = !a.no_dp_overlap;
  l.cp = a.cp.value_or(1);
  l.ep = a.ep.value_or(1);
  l.etp = a.etp.value_or(0);
  l.capacity_factor = a.capacity_factor;
  l.moe_dispatcher = plan::parse_dispatcher(a.moe_dispatcher);
  if (a.fp8) l.fp8 = plan::parse_fp8(*a.fp8);
  l.fp8_params = a.fp8_params;
  l.distributed_optimizer = a.distributed_optimizer;
  l.tp_comm_overlap = a.tp_comm_overlap;
  l.pp_comm_overlap = a.pp_comm_overlap;
  l.uneven_pipeline = a.uneven_pipeline;
  return l;
}

/// Flags given on the command line pin that dimension of the search.
plan::SearchSpace space_from(const PlanArgs& a, const plan::SystemSpec& sys) {
  plan::SearchSpace s;
  s.gpus = a.gpus.value_or(sys.total_gpus());
  s.global_batch = a.global_batch.value_or(0);
  if (a.model.t) s.tp = {static_cast<int>(*a.model.t)};
  if (a.pp) s.pp = {*a.pp};
  if (a.model.b) s.micro_batch = {*a.model.b};
  if (a.interleave) s.interleave = {*a.interleave};
  if (a.recompute) s.recompute = {plan::parse_recompute(*a.recompute)};
  if (a.sequence_parallel) s.sequence_parallel = {true};
  if (a.zero) s.zero = {*a.zero};
  s.allow_tp_across_nodes = a.allow_tp_across_nodes;
  s.dp_overlap = !a.no_dp_overlap;
  if (a.cp) s.cp = {*a.cp};
  if (a.ep) s.ep = {*a.ep};
  s.etp = a.etp.value_or(0);
  s.capacity_factor = a.capacity_factor;
  s.moe_dispatcher = plan::parse_dispatcher(a.moe_dispatcher);
  if (a.fp8) s.fp8 = plan::parse_fp8(*a.fp8);
  s.uneven_pipeline = a.uneven_pipeline;
  s.fp8_params = a.fp8_params;
  if (a.distributed_optimizer) s.distributed_optimizer = {true};
  s.tp_comm_overlap = a.tp_comm_overlap;
  s.pp_comm_overlap = a.pp_comm_overlap;
  return s;
}

void run_validation(const PlanArgs& a) {
  const auto rows = plan::validate_runs(plan::load_published_runs(a.validate));
  if (a.json) {
    std::cout << plan::to_json(rows).dump(2) << "\n";
  } else {
    fmt::print("{}", format_validation(rows));
  }
}

void run(const PlanArgs& a) {
  const auto options = plan_options(a);
  if (!a.validate.empty()) {
    run_validation(a);
    return;
  }
  const auto model = build_model(a.model);
  const auto sys = plan::resolve_system(a.system);
  const auto dev = pick_device(a, sys);
  const auto comm = make_comm(a, sys, dev);
  if (a.advise) {
    codesign::AdvisorOptions opts;
    opts.budget = a.budget;
    opts.top = a.top;
    const auto pairs =
        plan::advise_with_layouts(model, dev, comm, space_from(a, sys), opts, options);
    if (a.json) {
      std::cout << plan::to_json(pairs).dump(2) << "\n";
    } else {
      fmt::print("{}\n{}\n{}", describe_model(model), peak_line(dev, model.dtype),
                 format_advice(pairs));
    }
    return;
  }
  if (a.search) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto found = plan::search_layouts(model, dev, comm, space_from(a, sys), a.top, options);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (a.json) {
      auto j = plan::to_json(found, secs);
      j["device_peak"] = plan::peak_to_json(dev, model.dtype);
      std::cout << j.dump(2) << "\n";
    } else {
      fmt::print("{}\nsystem: {} ({} GPUs), device: {}\n{}\n{}", describe_model(model), sys.name,
                 sys.total_gpus(), dev.name, peak_line(dev, model.dtype),
                 format_search(found, secs));
    }
    return;
  }
  const auto layout = plan::resolve_layout(layout_from(a), model, sys);
  const auto r = plan::plan_step(model, dev, comm, layout, options);
  if (a.json) {
    auto j = plan::to_json(r);
    j["device_peak"] = plan::peak_to_json(dev, model.dtype);
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("{}\n{}{}", describe_model(model), peak_line(dev, model.dtype), format_plan(r));
  }
  if (!r.memory.fits) exit_code() = 3;
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan",
      "predict training step time, TFLOP/s and memory per GPU of a parallel layout; "
      "--search ranks layouts, --advise joins the shape advisor");
  add_model_options(cmd, args->model);
  cmd->add_option("--device", args->device,
                  "device catalog name or JSON file (default: the system's device; 'local' = this "
                  "CPU)");
  cmd->add_flag("--no-peak-probe", args->no_peak_probe,
                "local-cpu: keep the fp32 peak estimated from CPU facts instead of measuring it "
                "with the quick SGEMM probe (deterministic output)");
  cmd->add_option("--system", args->system, "system catalog name or JSON file (data/systems)")
      ->capture_default_str();
  cmd->add_option("--gpus", args->gpus, "GPUs used (default: tp*pp*dp, or the whole system)");
  cmd->add_option("--pp", args->pp, "pipeline-parallel stages");
  cmd->add_option("--dp", args->dp, "data-parallel replicas (default: gpus / (tp*pp))");
  cmd->add_option("--global-batch", args->global_batch,
                  "sequences per step (default: micro-batch x dp)");
  cmd->add_option("--interleave", args->interleave, "model chunks per stage (interleaved 1F1B)");
  cmd->add_option("--recompute", args->recompute, "activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  cmd->add_option("--recompute-modules", args->recompute_modules,
                  "what --recompute selective reruns: core_attn (default), layernorm, moe_act")
      ->delimiter(',')
      ->check(CLI::IsMember({"core_attn", "layernorm", "moe_act"}));
  cmd->add_flag("--sequence-parallel", args->sequence_parallel,
                "shard norms and dropout over the TP group (Megatron sequence parallelism)");
  cmd->add_option("--zero", args->zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  cmd->add_option("--cp", args->cp,
                  "context-parallel ranks (ring attention over s/cp tokens each; flash attention)");
  cmd->add_option("--ep", args->ep, "expert-parallel ranks (MoE experts spread by all_to_all)");
  cmd->add_option("--etp", args->etp, "expert tensor-parallel size (default: --tp)");
  cmd->add_option("--capacity-factor", args->capacity_factor,
                  "tokens per expert over the balanced share (padding or dropping); 0 = dropless")
      ->capture_default_str();
  cmd->add_option("--moe-dispatcher", args->moe_dispatcher,
                  "alltoall (one copy per routed expert) or flex (DeepEP/HybridEP: once per "
                  "remote node, forwarded over NVLink)")
      ->check(CLI::IsMember({"alltoall", "flex"}))
      ->capture_default_str();
  cmd->add_flag("--moe-glu-clamp", args->moe_glu_clamp,
                "the experts' gated activation clamps its inputs first (gpt-oss): two clamps and "
                "a concatenation priced before the fused kernel");
  cmd->add_option("--fp8", args->fp8,
                  "FP8 linear layers as Transformer Engine runs them: scaling recipe")
      ->check(CLI::IsMember({"none", "delayed", "current", "blockwise", "mxfp8"}));
  cmd->add_flag("--fp8-params", args->fp8_params, "weights kept in FP8 (no per-step weight cast)");
  cmd->add_flag("--distributed-optimizer", args->distributed_optimizer,
                "Megatron's distributed optimizer: gradients reduce-scattered and parameters "
                "all-gathered over dp x cp, overlapped; optimizer state sharded");
  cmd->add_flag("--tp-comm-overlap", args->tp_comm_overlap,
                "TP/SP collectives pipelined with their GEMMs (Transformer Engine userbuffers)");
  cmd->add_flag("--pp-comm-overlap", args->pp_comm_overlap,
                "pipeline sends and receives overlapped with compute");
  cmd->add_flag("--uneven-pipeline", args->uneven_pipeline,
                "layers need not divide pp x interleave (Megatron-Core pipeline layouts); each "
                "stage is priced at L/pp layers");
  cmd->add_option("--grad-dtype", args->grad_dtype,
                  "dtype of the gradient buffer and its reduction (default: the model's; "
                  "Megatron-LM accumulates bf16 models' gradients in fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--optimizer-bytes", args->optimizer_bytes,
                  "optimizer state per parameter in bytes (Adam with fp32 master: 12)")
      ->capture_default_str();
  cmd->add_flag("--allow-tp-across-nodes", args->allow_tp_across_nodes,
                "accept a TP group larger than a node");
  cmd->add_flag("--no-dp-overlap", args->no_dp_overlap,
                "do not overlap the gradient reduction with the last backward pass");
  cmd->add_option("--dp-bucket-mb", args->dp_bucket_mb,
                  "gradient bucket of the data-parallel reduction in MB (10^6 bytes); each "
                  "bucket is priced at its own size")
      ->capture_default_str();
  cmd->add_option("--comm-table", args->comm_tables,
                  "measured `mcr tune` table: FILE (every tier), intra=FILE or inter=FILE");
  cmd->add_option("--rules", args->rules,
                  "selection rules as MCR_RULES, applied before the tables");
  cmd->add_flag("--json", args->json, "JSON output");
  cmd->add_flag("--search", args->search,
                "rank every valid layout for --gpus (needs --global-batch)");
  cmd->add_flag("--advise", args->advise,
                "search shapes near the model (shape advisor) and the best layout of each");
  cmd->add_option("--validate", args->validate,
                  "predict the published runs of FILE (docs/planner.md) and print the errors");
  cmd->add_option("--top", args->top, "layouts or pairs to list")->capture_default_str();
  cmd->add_option("--budget", args->budget, "--advise: allowed relative parameter change")
      ->capture_default_str();
  cmd->callback([args] { run(*args); });
}

}  // namespace mcr::cli
